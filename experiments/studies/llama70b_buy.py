#!/usr/bin/python3
"""Study (issue 15 b): what to buy to run Llama-3.1-70B at 4 bits (q4, 512-token prompt, 64 decoded, batch 1) at
10 tokens/s: `sim plan --min-tps 10 --cheapest` over every consumer card of the catalogue, pairs of the 12, 16, 24
and 32 GB cards (the RTX 3090 pair with and without its NVLink bridge) and the two 48 GB workstation cards, each
strategy's knob searched, priced at the GPUs' launch MSRP (calib/catalogue; host, links and bridges not priced).
One command writes results/studies/llama70b-buy/: plan.jsonl (sim plan's output: every machine x strategy, ranked,
with its bottleneck and the sim run command), commands.txt, plan.png (experiments/plot.py: tokens/s against price
and against GPU memory, the Pareto front ringed) and README.md (the answer, read from plan.jsonl).

  /usr/bin/python3 experiments/studies/llama70b_buy.py          (from the repository root; SIM=path overrides
                                                                 ./build/bin/sim)
"""
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SIM = os.environ.get("SIM", os.path.join(ROOT, "build", "bin", "sim"))
OUT = os.path.join(ROOT, "results", "studies", "llama70b-buy")
GOAL = 10.0
HW = ("consumer,2xrtx3060-12gb,2xrtx4060ti-16gb,2xrtx5060ti-16gb,2xrtx4070ti-super,2xrtx5070ti,2xrtx3090,"
      "2xrtx3090+nvlink,2xrtx4090,2xrtx5090,rtx-a6000,rtx6000-ada")
PLAN = ["plan", "--model", "traces/models/llama-3.1-70b.json", "--dtype", "q4", "--decode", "64",
        "--min-tps", f"{GOAL:g}", "--cheapest", "--hw", HW, "--format", "jsonl", "--jobs", "2"]
PLOT = ["experiments/plot.py", "results/studies/llama70b-buy/plan.jsonl", "-o", "results/studies/llama70b-buy/plan.png",
        "--goal", f"{GOAL:g}", "--title",
        "Llama-3.1-70B q4, batch 1: decode tokens/s against price and GPU memory, consumer cards and pairs "
        "(tiersim plan, predictions)"]


def run(argv, name):
    """Run a command from the repository root; exit with its error output on failure."""
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"llama70b_buy.py: {name} failed\n{out.stderr}")
    return out.stdout


def readme(rows):
    """README.md: the cheapest machine at 10 tokens/s and what limits it, read from the plan."""
    ok = [r for r in rows if r.get("tokens_per_s") is not None and not r.get("error")]
    meet = [r for r in ok if r["tokens_per_s"] >= GOAL]
    price = min(r["price_usd"] for r in meet)
    best = max((r for r in meet if r["price_usd"] == price), key=lambda r: r["tokens_per_s"])
    same = [r for r in meet if r["price_usd"] == price and r["strategy"] == best["strategy"] and r is not best]
    cheaper = max((r for r in ok if r["price_usd"] < price), key=lambda r: r["tokens_per_s"])
    pairs16 = max((r for r in ok if r["hw"].startswith("2x") and r["price_usd"] < price), key=lambda r: r["tokens_per_s"])
    workstation = ("rtx-a6000", "rtx6000-ada")
    single_meet = min((r for r in meet if r["hw"] in workstation), key=lambda r: r["price_usd"])
    fastest = max(ok, key=lambda r: r["tokens_per_s"])
    weights = next((r["error"] for r in rows if r["strategy"] == "resident" and r.get("error")), "")
    need = weights.split(" needs ")[1].split(" on ")[0] if " needs " in weights else "?"
    f = lambda v: f"{v:.3g}"
    also = f" (without the bridge, `{same[0]['hw']}`: {f(same[0]['tokens_per_s'])})" if same else ""
    return f"""# Llama-3.1-70B at 4 bits: what to buy for 10 tokens/s

![decode tokens/s against price and GPU memory](plan.png)

`/usr/bin/python3 experiments/studies/llama70b_buy.py`: tiersim's predictions, not measurements (plan.jsonl has
every machine and strategy with the `sim run` command that reproduces it; prices are the GPUs' launch MSRP, the
host not included: used RTX 3090s sell for less, `sim plan --price rtx3090=USD` re-ranks).

The cheapest machine predicted to make {GOAL:g} tokens/s is `{best['hw']}` (${price:,.0f}) under `{best['strategy']}`,
{f(best['tokens_per_s'])} tokens/s{also}, limited by "{best['bottleneck']}": the {need} it needs fit on the two
24 GB cards, so each token reads the weights from GPU memory, half on one card and then half on the other, and the
bridge hardly matters. Everything cheaper leaves layers in host memory and is limited by "{cheaper['bottleneck']}":
the best is `{cheaper['hw']}` {cheaper['strategy']} {cheaper['setting']} at {f(cheaper['tokens_per_s'])} tokens/s, and two
16 GB cards (32 GB) still fall short at {f(pairs16['tokens_per_s'])} (`{pairs16['hw']}`).
A single 48 GB card also reaches the goal (`{single_meet['hw']}`, ${single_meet['price_usd']:,.0f},
{f(single_meet['tokens_per_s'])} tokens/s), and the fastest machine here is `{fastest['hw']}` ({f(fastest['tokens_per_s'])} tokens/s,
${fastest['price_usd']:,.0f}).
"""


def main():
    os.makedirs(OUT, exist_ok=True)
    plan = run([SIM] + PLAN, "sim plan")
    with open(os.path.join(OUT, "plan.jsonl"), "w") as f:
        f.write(plan)
    run([sys.executable] + PLOT, "experiments/plot.py")
    with open(os.path.join(OUT, "commands.txt"), "w") as f:
        f.write("# made by: /usr/bin/python3 experiments/studies/llama70b_buy.py\n"
                "sim " + " ".join(shlex.quote(a) for a in PLAN) + " > results/studies/llama70b-buy/plan.jsonl\n"
                "/usr/bin/python3 " + " ".join(shlex.quote(a) for a in PLOT) + "\n")
    rows = [json.loads(l) for l in plan.splitlines() if l.strip()]
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write(readme(rows))
    print(f"wrote {os.path.relpath(OUT, ROOT)}: {len(rows)} rows")


if __name__ == "__main__":
    main()
