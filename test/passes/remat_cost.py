"""Prints how plan.json's predicted step time grows with recomputation and
host copies: `remat_cost.py BASE.json WITH.json KEY` checks that every
rank's predicted step with WITH exceeds the one with BASE by exactly the
per-microbatch seconds of KEY (`recompute_seconds` or `host_copy_seconds`)
of its stages times the microbatches (one rank: no pipeline bubble to hide
them)."""
import json
import sys

base, with_, key = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])),
                    sys.argv[3])
microbatches = with_["batch"]["microbatches"]
for r_base, r_with in zip(base["ranks"], with_["ranks"]):
    stages = [s for s in with_["stages"] if s["stage"] in r_with["stages"]]
    added = microbatches * sum(s[key] for s in stages)
    grown = r_with["predicted_step_seconds"] - r_base["predicted_step_seconds"]
    print(f"rank {r_with['rank']}: {key} > 0: {added > 0}, step "
          f"{r_with['predicted_step_seconds']:.6g} s - "
          f"{r_base['predicted_step_seconds']:.6g} s = {grown:.6g} s, "
          f"microbatches x {key}: {added:.6g} s, equal: "
          f"{abs(grown - added) <= 1e-9 * r_with['predicted_step_seconds']}")
