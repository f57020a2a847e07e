#!/usr/bin/env python3
"""The docs test: every command the docs show with its output is run, and its output compared.

It reads README.md and docs/*.md (or the files given with --files) for blocks written as

    ```console
    $ sim ARGS...
    <the output sim prints>
    $ sim OTHER ARGS...
    <its output>
    ```

A line starting with `$ ` is a command (a line ending in a backslash continues it on the next line,
as in a shell); the lines after it, up to the next `$ ` line or the end of the block, are its expected
output. The command is split as a POSIX shell would split it (shlex: quotes and backslashes, no
variables, pipes or redirections) and run from the repository root without a shell, its first word
`sim` or `./build/bin/sim` replaced by the binary given with --sim. Standard output and standard error
are read through one pipe, in the order the process writes them (a terminal may interleave them
otherwise: the docs show what a pipe receives).

Compared exactly, after normalising only what a Markdown file cannot keep: trailing spaces and tabs at
the end of each line, and blank lines at the end of the output. An exit status of 0, 2 (bad input) or 3
(does not fit) is accepted, since the docs show refusals too; 1 (internal error) or a signal fails.

Two checks that need no binary go with it: every relative link of those files leads to a file that exists
(and a `#anchor` to a heading of it, spelled as GitHub spells anchors), pages that others are still writing
(PENDING) excepted while they are missing; and docs/layout.md's tree names folders that exist, and names every
top-level folder and every folder of sim/, sim/model/ and policies/ that git tracks; and the README's first
console command is the one `./setup.sh demo` runs.

Exit status: 0 when every command printed what the docs show and the checks pass, 1 otherwise (each
difference as a unified diff), 2 for bad arguments or a malformed block. Only the Python standard library
is used.
"""

import argparse
import concurrent.futures
import difflib
import glob
import os
import re
import shlex
import subprocess
import sys
import time

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([A-Za-z0-9_+-]*)")
SIM_WORDS = ("sim", "./build/bin/sim", "build/bin/sim")
# Pages the README and the index link to that other sessions write; a missing one is not an error yet.
PENDING = ("docs/accuracy.md", "docs/errors.md")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
LAYOUT_ROOTS = ("sim", "sim/model", "policies")


class Command:
    def __init__(self, path, line, text, expected):
        self.path = path  # the Markdown file, relative to the root
        self.line = line  # 1-based line of the `$ ` line
        self.text = text  # the command as written (continuations joined)
        self.expected = expected  # list of lines
        self.out_start = None  # 0-based index of its first output line in the file (for --update)
        self.out_end = None  # one past its last


def parse_file(root, path):
    """The console blocks' commands of one Markdown file."""
    rel = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    commands = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3)
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence[0] * len(fence)):
            body.append((i + 1, lines[i]))
            i += 1
        if i >= len(lines):
            raise SystemExit(f"{rel}:{start + 1}: a code block that is never closed")
        i += 1
        if lang != "console":
            continue
        indent = len(m.group(1))
        current = None
        j = 0
        while j < len(body):
            lineno, text = body[j]
            text = text[indent:] if text[:indent].strip() == "" else text
            if text.startswith("$ "):
                cmd = text[2:]
                while cmd.endswith("\\"):
                    j += 1
                    if j >= len(body):
                        raise SystemExit(f"{rel}:{lineno}: a command continued past the block's end")
                    cmd = cmd[:-1] + " " + body[j][1].strip()
                current = Command(rel, lineno, cmd.strip(), [])
                current.out_start = current.out_end = body[j][0]
                commands.append(current)
            elif current is None:
                raise SystemExit(f"{rel}:{lineno}: a console block must start with a `$ ` command line")
            else:
                current.expected.append(text)
                current.out_end = lineno
            j += 1
    return commands


def normalise(lines):
    out = [line.rstrip(" \t") for line in lines]
    while out and out[-1] == "":
        out.pop()
    return out


def run(command, root, sim, timeout):
    try:
        argv = shlex.split(command.text)
    except ValueError as e:
        return command, None, f"cannot split the command: {e}", 0.0
    if not argv or argv[0] not in SIM_WORDS:
        return command, None, f"a docs command must start with `sim` (got {argv[0] if argv else 'nothing'!r})", 0.0
    argv[0] = sim
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return command, None, f"ran past {timeout} s", time.monotonic() - t0
    seconds = time.monotonic() - t0
    if p.returncode not in (0, 2, 3):
        return command, p.stdout.decode("utf-8", "replace"), f"exit status {p.returncode}", seconds
    return command, p.stdout.decode("utf-8", "replace"), None, seconds


def anchors(path):
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    seen = {}
    out = set()
    for _, line in prose_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def check_links(root, files):
    problems = []
    cache = {}
    for path in files:
        rel = os.path.relpath(path, root)
        for n, line in prose_lines(path):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                dest_rel = os.path.relpath(dest, root)
                if not os.path.exists(dest):
                    if dest_rel not in PENDING:
                        problems.append(f"{rel}:{n}: the link {target} leads to {dest_rel}, which does not exist")
                    continue
                if anchor and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        problems.append(f"{rel}:{n}: the link {target}: {dest_rel} has no heading #{anchor}")
    return problems


def prose_lines(path):
    """(line number, text) of a Markdown file outside its code blocks."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fence = None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)[0] * len(m.group(2))
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        yield n, line


def check_layout(root):
    path = os.path.join(root, "docs", "layout.md")
    if not os.path.exists(path):
        return ["docs/layout.md is missing"]
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith("```")), None)
    if start is None:
        return ["docs/layout.md: no tree block"]
    named = set()
    stack = []
    problems = []
    for n, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("```"):
            break
        m = re.match(r"^( *)(\S+/)(\s|$)", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2).rstrip("/")]
        folder = "/".join(stack)
        named.add(folder)
        if not os.path.isdir(os.path.join(root, folder)):
            problems.append(f"docs/layout.md:{n}: {folder}/ does not exist")
    try:
        tracked = subprocess.run(["git", "-C", root, "ls-files"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, check=True).stdout.decode().split("\n")
    except (OSError, subprocess.CalledProcessError):
        return problems  # not a git checkout: the completeness check needs git's list
    folders = set()
    for f in tracked:
        parts = f.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folders.add("/".join(parts[:i]))
    for folder in sorted(folders):
        parent = folder.rpartition("/")[0]
        if (parent == "" and not folder.startswith(".")) or parent in LAYOUT_ROOTS:
            if folder not in named:
                problems.append(f"docs/layout.md: the tree does not name {folder}/")
    return problems


def update(root, outputs):
    """Writes each command's output under it, in place of what the docs showed."""
    by_file = {}
    for command, output in outputs:
        got = normalise(output.split("\n"))
        if got != normalise(command.expected):
            by_file.setdefault(command.path, []).append((command, got))
    for rel, changes in by_file.items():
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for command, got in sorted(changes, key=lambda c: -c[0].out_start):
            lines[command.out_start:command.out_end] = got
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"docs test: updated {len(changes)} output(s) in {rel}")


def check_demo(root, commands):
    """./setup.sh demo runs the README's worked example: the same command, word for word."""
    try:
        with open(os.path.join(root, "setup.sh"), encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError:
        return []
    demo = None
    in_demo = False
    for line in lines:
        if line.strip() == "demo)":
            in_demo = True
        elif in_demo and line.strip() == ";;":
            break
        elif in_demo and line.strip().startswith("./build/bin/sim"):
            demo = line.strip()
    first = next((c for c in commands if c.path == "README.md"), None)
    if demo is None or first is None:
        return ["setup.sh's demo runs no ./build/bin/sim command, or README.md shows none"]
    if shlex.split(demo) != shlex.split(first.text):
        return [f"README.md:{first.line}: the worked example is not what ./setup.sh demo runs ({demo})"]
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", required=True, help="the built sim binary")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."),
                    help="the repository root (default: two folders above this script)")
    ap.add_argument("--files", nargs="*", help="Markdown files to check (default: README.md and docs/*.md)")
    ap.add_argument("--jobs", type=int, default=2, help="commands run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one command may take (default 120)")
    ap.add_argument("--list", action="store_true", help="list the commands and exit")
    ap.add_argument("--times", action="store_true", help="print each command's seconds")
    ap.add_argument("--update", action="store_true",
                    help="write what sim prints into the docs in place of what they show (then read the diff)")
    args = ap.parse_args()

    root = os.path.abspath(args.root)
    sim = os.path.abspath(args.sim)
    if not os.access(sim, os.X_OK):
        print(f"docs test: {sim} is not an executable", file=sys.stderr)
        return 2
    files = args.files if args.files else [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "*.md")))
    commands = []
    for path in files:
        commands += parse_file(root, os.path.abspath(path))
    problems = check_links(root, files) + check_layout(root)
    if not args.files:
        problems += check_demo(root, commands)
    for p in problems:
        print(f"FAIL {p}")
    if args.list:
        for c in commands:
            print(f"{c.path}:{c.line}: {c.text}")
        return 0

    t0 = time.monotonic()
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda c: run(c, root, sim, args.timeout), commands))
    for command, output, problem, seconds in results:
        if args.times:
            print(f"{seconds:7.2f} s  {command.path}:{command.line}")
        got = normalise(output.split("\n")) if output is not None else None
        want = normalise(command.expected)
        if problem is None and got == want:
            continue
        failures += 1
        print(f"FAIL {command.path}:{command.line}: $ {command.text}")
        if problem:
            print(f"  {problem}")
        if got is not None and got != want:
            diff = difflib.unified_diff(want, got, "the docs", "what sim prints", lineterm="")
            print("\n".join("  " + d for d in diff))
    print(f"docs test: {len(commands) - failures} of {len(commands)} commands print what the docs show "
          f"({len(files)} files, {time.monotonic() - t0:.1f} s)")
    if args.update:
        update(root, [(c, o) for c, o, problem, _ in results if problem is None and o is not None])
    if problems:
        print(f"docs test: {len(problems)} broken link(s) or layout difference(s)")
    return 1 if failures or problems else 0


if __name__ == "__main__":
    sys.exit(main())
