"""Property-based fuzzing (hypothesis) of every decoder the pipelines use on untrusted input, one module per decoder
family: each returns a valid record or its documented dead-letter reason, never raises anything else, never hangs
and never allocates without bound. Derandomized (CI draws the examples drawn here), with example counts chosen so
that the whole folder runs in about 15 s on one core, under 30 s (each module's docstring gives its share; 15 times
as many examples, not derandomized, found no other failure)."""
