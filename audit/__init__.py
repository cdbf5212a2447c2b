"""A black-box privacy audit of the project's mechanisms: lower bounds on epsilon from their own outputs.

Each ``AuditCase`` (``audit.case``) runs one mechanism, through the same Beam-free code the pipelines call and
with the secure noise source, many times on each of two neighbouring inputs chosen at the worst case of its
proof, and reduces every output to a scalar test statistic. ``audit.auditor`` then

1. **searches** an output event on a first, independent set of samples: among threshold sets of the statistic
   ({S >= t}, {S <= t}, and {S = v} when it takes few values), as StatDP does (Ding et al., CCS 2018), the one
   whose Clopper-Pearson lower bound on epsilon is largest (``audit.events``);
2. **tests** that one event on fresh samples: exact Clopper-Pearson intervals for its probability on each side
   turn into a lower bound on epsilon at the claimed delta, eps >= ln((P[M(D) in E] - delta) / P[M(D') in E]),
   valid with the stated confidence (``audit.bounds``).

Selecting the event on samples the bound does not use keeps the bound valid (the event is fixed before the
test samples are drawn). A mechanism is consistent with its claim when the bound is at or below the claimed
epsilon; a bound above it is a proof, at that confidence, that the claim is false.
"""
