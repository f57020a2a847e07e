#!/usr/bin/env python3
"""`sim train --optimizer-offload` against training steps with torchao's CPUOffloadOptimizer measured on an H100
(results/validation/optimizer-offload/train_offload.jsonl, made by experiments/validate/run_offload_lease.sh, and
train_offload_8b.jsonl: Llama-3.1-8B, see the README there;
transformers' Qwen3ForCausalLM with random weights, torchao's own cpu_offload.py staged by stage_torchao.sh,
2 warm-up + 3 measured steps, a process per row). Nothing was fitted to these rows: the GPU side is sim train's
(its tensors, the caching allocator, the runtime's training costs), the CPU AdamW step's costs were fitted on
synthetic parameters (experiments/validate/cpu_offload_fit.py), the copies take h100-measured's pinned rates.

Per row: peak allocated and reserved, the step time, the optimizer phase (opt.step(): the CPU steps and the
copies back) and the backward phase (its copies to the host included; the harness synchronizes at each phase's
end), and the host memory the optimizer takes against the process's resident memory after the steps (which
also holds PyTorch's and CUDA's own, about 1-2 GiB, not predicted).
Writes results/validation/optimizer-offload/compare.md and prints it.
  /usr/bin/python3 experiments/validate/offload_compare.py   (after building; TIERSIM_SIM=path/to/sim)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_compare  # noqa: E402

ROOT = train_compare.ROOT
HERE = os.path.join(ROOT, "results", "validation", "optimizer-offload")
GIB = 1024.0 ** 3


def main():
    rows = [json.loads(line) for name in ("train_offload.jsonl", "train_offload_8b.jsonl")
            for line in open(os.path.join(HERE, name))]
    rows = [r for r in rows if "max_memory_allocated" in r]
    lines = ["| model | set-up | ckpt | offload | alloc GiB meas / pred | err | reserved GiB meas / pred | err |"
             " step ms meas / pred | err | backward ms meas / pred | optimizer ms meas / pred | err |"
             " host GiB: RSS / optimizer's |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errors = {"alloc": [], "reserved": [], "step": [], "optimizer phase": []}
    for r in rows:
        p = train_compare.predict(r)
        f = p["optimizer_offload_time"]
        # sim's step = engine step (forward, backward) + what the offload adds; its backward phase is the engine's
        # backward share plus the copies' exposed time, its optimizer phase the CPU steps and the copies back.
        p_bwd = f["backward_seconds"] + f["d2h_exposed_seconds"]
        p_opt = f["cpu_seconds"] + f["h2d_exposed_seconds"]
        m_alloc, m_res = r["max_memory_allocated"], r["max_memory_reserved"]
        p_alloc, p_res = p["allocator_peak_allocated_bytes"], p["allocator_peak_reserved_bytes"]
        e = {"alloc": train_compare.err(p_alloc, m_alloc), "reserved": train_compare.err(p_res, m_res),
             "step": train_compare.err(1000 * p["step_seconds"], r["step_ms"]),
             "optimizer phase": train_compare.err(1000 * p_opt, r["phase_ms"]["optimizer"])}
        for k in errors:
            errors[k].append(e[k])
        host = p["host_memory_bytes"]
        lines.append(
            f"| {r['model']} | {r['setup']} | {'on' if r['gradient_checkpointing'] else 'off'} | {r['optimizer_offload']} | "
            f"{m_alloc / GIB:.2f} / {p_alloc / GIB:.2f} | {e['alloc']:+.1f}% | {m_res / GIB:.2f} / {p_res / GIB:.2f} | "
            f"{e['reserved']:+.1f}% | {r['step_ms']:.0f} / {1000 * p['step_seconds']:.0f} | {e['step']:+.1f}% | "
            f"{r['phase_ms']['backward']:.0f} / {1000 * p_bwd:.0f} | {r['phase_ms']['optimizer']:.0f} / {1000 * p_opt:.0f} | "
            f"{e['optimizer phase']:+.1f}% | {r['host_rss_bytes'] / GIB:.1f} / {(host['pinned'] + host['optimizer_state']) / GIB:.1f} |")
    lines += ["", f"{len(rows)} rows. Mean absolute error (worst):"]
    # The loop without per-phase synchronization (train_offload_nosync.jsonl, run_offload_nosync_lease.sh, another
    # host): the same steps timed both ways in one process, against sim (which leaves out that overlap).
    nosync = [json.loads(line) for line in open(os.path.join(HERE, "train_offload_nosync.jsonl"))]
    tail = ["", "Steps timed with and without a synchronize at every phase's end (train_offload_nosync.jsonl, another "
            "H100 host, the same process for both):", "",
            "| model | set-up | ckpt | offload | step ms synced / unsynced / sim | sim err vs unsynced |",
            "|---|---|---|---|---|---|"]
    for r in nosync:
        p = train_compare.predict(r)
        tail.append(f"| {r['model']} | {r['setup']} | {'on' if r['gradient_checkpointing'] else 'off'} | "
                    f"{r.get('optimizer_offload', 'none')} | {r['step_ms']:.0f} / {r['unsynced_step_ms']:.0f} / "
                    f"{1000 * p['step_seconds']:.0f} | {train_compare.err(1000 * p['step_seconds'], r['unsynced_step_ms']):+.1f}% |")
    train_compare.write_table(lines, errors, os.path.join(HERE, "compare.md"))
    with open(os.path.join(HERE, "compare.md"), "a") as f:
        f.write("\n".join(tail) + "\n")
    print("\n".join(tail))

if __name__ == "__main__":
    main()
