"""Prints what a plan.json holds and checks its sums, for plan-json.test.

The shape (the keys at each level) is printed so that FileCheck can show
that a one-stage and a pipeline plan have the same one; the relations
between the numbers (a rank's step is its pipeline part plus its
all-reduce plus its optimizer, a rank's FLOPs are its stages' per
microbatch times the microbatches plus the optimizer's...) are checked
here and printed as `ok` or the first relation that does not hold.
"""
import json
import math
import sys


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check(plan):
    ranks, stages = plan["ranks"], plan["stages"]
    mesh = plan["mesh"]
    if len(ranks) != plan["world_size"] or plan["world_size"] != mesh["data"] * mesh["pipeline"] * mesh["tensor"]:
        return "the ranks do not cover the mesh"
    by_stage = {s["stage"]: s for s in stages}
    for s in stages:
        # The device-memory timeline (the arena in use at each op, from the
        # memory plan's offsets and lifetimes) peaks at the stage's peak.
        points = [b for f in s["memory_timeline"] for b in f["bytes"]]
        if not points or max(points) != s["predicted_memory"]["peak_bytes"]:
            return f"stage {s['stage']}: the memory timeline's highest point is not its peak"
    mbs = plan["batch"]["microbatches"]
    step = 0.0
    for r in ranks:
        held = [by_stage[s] for s in r["stages"]]
        if any(s["pipeline_rank"] != r["pipeline_rank"] for s in held):
            return f"rank {r['rank']} holds a stage of another pipeline rank"
        b = r["predicted_step_breakdown"]
        own = b["pipeline_seconds"] + b["all_reduce_seconds"] + b["optimizer_seconds"]
        step = max(step, own)
        if not close(b["optimizer_seconds"], sum(s["optimizer_seconds"] for s in held)):
            return f"rank {r['rank']}: optimizer seconds are not its stages'"
        flops = sum(mbs * (s["forward_flops"] + s["backward_flops"]) + s["optimizer_flops"] for s in held)
        if not close(r["flops"], flops):
            return f"rank {r['rank']}: flops are not microbatches x its stages' + the optimizer's"
        for key, value in r["predicted_memory"].items():
            if value != sum(s["predicted_memory"][key] for s in held):
                return f"rank {r['rank']}: predicted_memory.{key} is not the sum of its stages'"
        space = r["predicted_memory_by_space"]
        if space["device"] != r["predicted_memory"]["peak_bytes"] or space["host"] != 0:
            return f"rank {r['rank']}: memory by space is not the device's peak"
        acts = r["predicted_activations_by_space"]
        if acts["device"] != r["predicted_memory"]["activations"] or acts["host"] != space["host"]:
            return f"rank {r['rank']}: activations by space are not the device arena's activations and the host arena"
        # The live peak (what cleave-run measures) fits its arena: the
        # arena adds alignment and first-fit holes (docs/plan.md).
        live = r["predicted_live_peak_bytes"]
        if not 0 < live["device"] <= space["device"] or not 0 <= live["host"] <= space["host"]:
            return f"rank {r['rank']}: the live peak is not positive or not within its arena"
        if (mesh["data"] > 1) != (b["all_reduce_seconds"] > 0):
            return f"rank {r['rank']}: an all-reduce without data parallelism or none with it"
        if r["first_sample"] != r["data_rank"] * plan["batch"]["microbatch_size"] * mbs:
            return f"rank {r['rank']}: first_sample is not its data rank's"
    for r in ranks:
        if not close(r["predicted_step_seconds"], step):
            return f"rank {r['rank']}: the step is not the slowest rank's"
    if not close(plan["predicted_step_seconds"], step) or step <= 0:
        return "the plan's step is not the slowest rank's, or not positive"
    if not close(plan["flops_per_step"], sum(r["flops"] for r in ranks)) or plan["flops_per_step"] <= 0:
        return "flops_per_step is not the ranks' sum, or not positive"
    if any(not s["first_node"] or not s["last_node"] for s in stages):
        return "a stage has no node range"
    spans = plan["timeline"]
    if len(spans) != 2 * mbs * len(stages):
        return "the timeline does not hold a forward and a backward per microbatch and stage"
    return "ok"


for path in sys.argv[1:]:
    plan = json.load(open(path))
    print("plan keys:", " ".join(sorted(plan)))
    print("rank keys:", " ".join(sorted(plan["ranks"][0])))
    print("stage keys:", " ".join(sorted(plan["stages"][0])))
    print("schedule keys:", " ".join(sorted(plan["schedule"])))
    print("stages:", len(plan["stages"]), "ranks:", len(plan["ranks"]))
    print("all-reduce seconds > 0:",
          all(r["predicted_step_breakdown"]["all_reduce_seconds"] > 0 for r in plan["ranks"]))
    print("predicted bubble > 0:", plan["schedule"]["predicted_bubble"] > 0)
    print("relations:", check(plan))
