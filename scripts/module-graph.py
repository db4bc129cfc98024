#!/usr/bin/env python3
"""The module graph of opscope, from the #include lines of its sources, and the rule it must keep.

Each top-level folder is a module. An include names a module by where the header lives: a header under
<module>/**/include/ is that module's (<opscope/rundb/writer.h> is core's), a quoted relative path
("../../runtime/common/x.h") is the module it leads into. The rule (docs/DESIGN.md, "Modules"):

  runtime    the simulated MLU (runtime, kernel library, CPU reference): includes nothing of opscope
  core       what the hook and every tool share: runtime only
  the tools  every other top-level folder with a CMakeLists.txt (capture, compare, fallback, memcheck,
             profiler: the top CMakeLists.txt adds them by the same rule): core and runtime, never one another
  report     the report of a result directory or run folder (model, page, summary): core and runtime
  analysis   the offline analyses (opscope diff, opscope analyze, the collectives check): core, runtime and
             compare (its metrics library alone: opscope diff compares whole tensors by auto-compare's
             metrics); report and analysis never include each other (the launcher joins them)
  hooks      the preload library that assembles the tools: core, the tools, runtime
  tools      the command-line programs (opscope, op-replay): anything but hooks
  examples   the demo programs: runtime, and hooks' opscope.h
  torch_mlu  the PyTorch front end (a program's device, like the demos): runtime, and hooks' opscope.h
  tests, bench: anything

usage: scripts/module-graph.py [--root DIR] [--check | --markdown]
  --markdown  the graph as docs/DESIGN.md shows it (the default)
  --check     exit 1, naming each include that breaks the rule
"""
import argparse
import os
import re
import sys
from collections import defaultdict

# The modules that are not tools (CMakeLists.txt's OPSCOPE_FIXED_MODULES).
FIXED = ["runtime", "core", "hooks", "report", "analysis", "examples", "tools", "torch_mlu", "tests", "bench"]


def tools_of(root):
    """The tool folders: every other top-level folder with a CMakeLists.txt, by name."""
    return sorted(d for d in os.listdir(root) if d not in FIXED and not d.startswith(".")
                  and os.path.isfile(os.path.join(root, d, "CMakeLists.txt")))


def rule(tools):
    """Module -> the modules it may include."""
    return {
        "runtime": set(),
        "core": {"runtime"},
        **{tool: {"core", "runtime"} for tool in tools},
        "report": {"core", "runtime"},
        "analysis": {"core", "runtime", "compare"},
        "hooks": {"core", "runtime", *tools},
        "tools": {"core", "runtime", "report", "analysis", *tools},
        "examples": {"runtime", "hooks"},
        "torch_mlu": {"runtime", "hooks"},
    }


def order_of(tools):
    return ["runtime", "core", *tools, "report", "analysis", "hooks", "tools", "examples", "torch_mlu"]


SOURCE = (".cpp", ".h", ".cpp.in")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def walk(root, module):
    for folder, dirs, files in os.walk(os.path.join(root, module)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            yield os.path.join(folder, name)


def headers(root, modules):
    """Include path -> module, for every header under some module's include/ folder."""
    owner = {}
    for module in modules:
        for path in walk(root, module):
            rel = os.path.relpath(path, root)
            if "/include/" in rel:
                owner[rel.split("/include/", 1)[1]] = module
    return owner


def edges(root, order):
    """(module, used module) -> [(file, included path)] for every include that crosses modules."""
    modules = [m for m in order + ["tests", "bench"] if os.path.isdir(os.path.join(root, m))]
    owner = headers(root, modules)
    found = defaultdict(list)
    for module in modules:
        for path in walk(root, module):
            if not path.endswith(SOURCE):
                continue
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = owner.get(m.group(2))
                    if target is None and m.group(1) == '"':
                        resolved = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(path), m.group(2))), root)
                        top = resolved.split(os.sep, 1)[0]
                        target = top if top in modules else None
                    if target is not None and target != module:
                        found[(module, target)].append((rel, m.group(2)))
    return found


def markdown(found, order):
    # Edges only (not how many include lines): the table changes when a module gains or loses a dependency.
    lines = ["| module | includes headers of |", "|---|---|"]
    for module in order:
        used = sorted({t for (m, t) in found if m == module}, key=order.index)
        lines.append("| `{}` | {} |".format(module, ", ".join(used) or "—"))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    tools = tools_of(args.root)
    order, allowed = order_of(tools), rule(tools)
    found = edges(args.root, order)
    if not args.check:
        sys.stdout.write(markdown(found, order))
        return 0
    broken = 0
    for (module, target), uses in sorted(found.items()):
        if module in allowed and target not in allowed[module]:
            for path, included in uses:
                print("{}: includes {} ({}): {} may include only {}".format(
                    path, included, target, module, ", ".join(sorted(allowed[module])) or "itself"))
                broken += 1
    if broken:
        print("{} includes break the module rule (scripts/module-graph.py, docs/DESIGN.md)".format(broken))
        return 1
    print("module graph: no include breaks the rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
