"""Checks shard-collective-cost.test's plans: FAST.json SLOW.json DDP.json."""
import json
import sys

fast, slow, ddp = (json.load(open(p)) for p in sys.argv[1:4])


def collectives(plan):
    return sum(s["shard_collective_seconds"] for s in plan["stages"])


print(f"fast: shard_collective_seconds > 0: {collectives(fast) > 0}")
print(f"slow: more: {collectives(slow) > collectives(fast)}")
print(f"ddp: shard_collective_seconds == 0: {collectives(ddp) == 0}")
microbatches = fast["batch"]["microbatches"]
for a, b in zip(fast["ranks"], slow["ranks"]):
    def collectives_of(plan, rank):
        return sum(s["shard_collective_seconds"] for s in plan["stages"]
                   if s["stage"] in rank["stages"])
    grown = (b["predicted_step_seconds"] - a["predicted_step_seconds"]
             - (b["predicted_step_breakdown"]["all_reduce_seconds"]
                - a["predicted_step_breakdown"]["all_reduce_seconds"]))
    added = microbatches * (collectives_of(slow, b) - collectives_of(fast, a))
    print(f"rank {a['rank']}: the step grew by microbatches x the "
          f"collectives' growth: {added > 0 and abs(grown - added) <= 1e-9 * b['predicted_step_seconds']}"
          f" ({grown:.6g} s, {added:.6g} s)")
