#!/usr/bin/env python3
"""Cycles in the module graph of each crate of the workspace (native/*/src); between crates,
Cargo itself refuses a cycle.

Each file is mapped to its module path (`lib.rs` / `main.rs` is the crate root, `a.rs` and
`a/mod.rs` are `a`, `a/b.rs` is `a::b`; inline `mod x { ... }` blocks are modules too). Every
path that names a module of the crate is a reference: in `use` items (with their `{...}`
trees) and in code, starting with `crate::`, `self::`, `super::` or the name of a child
module. Comments, doc comments, strings and macros' `$crate` are skipped. Code under
`#[cfg(test)]` (test modules, inline or in their own file, and test-only items) is ignored:
tests may reach into any module. A reference through a `pub use` re-export is followed to the
module that defines the item, so `crate::Error` counts as a reference to `error`, and the
re-export itself counts as a reference of the module that makes it, except when a module
re-exports an item of its own sub-modules (a facade such as `collective/mod.rs`; its other
uses of them count). The crate root is the facade and the entry point: it is not a node.

The graph is checked at each level up to --depth (default 2): level 1 between the top-level
modules (`config`, `wire`, `ps`, ...), level 2 between the sub-modules of one top-level module
(`ps` itself, the file `ps/mod.rs`, and `ps::link`, `ps::client`, ...; a deeper module counts
as its level-2 ancestor). Every strongly connected component of more than one node is printed
with one example reference (file:line) for each of its edges.

scripts/module_cycles.known lists the cycles still allowed, one a line, as printed:
`<crate>: <node> <node> ...` (nodes sorted; `#` starts a comment). The script exits 1 when it
finds a cycle not listed there, or when a listed cycle no longer exists (remove its line: the
list only shrinks).

    python3 scripts/module_cycles.py              # check (part of `make lint`)
    python3 scripts/module_cycles.py --edges      # also print every edge of each level
    python3 scripts/module_cycles.py --self-test  # the parser and the cycle finder on examples
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Every crate of the workspace (between crates, Cargo itself refuses a cycle).
CRATES = {d.parent.name: d for d in sorted((ROOT / "native").glob("*/src"))}
KNOWN = ROOT / "scripts" / "module_cycles.known"

Path_ = tuple[str, ...]


@dataclass
class Tok:
    """One token: an identifier, `::`, or one punctuation character."""

    text: str
    line: int

    @property
    def ident(self) -> bool:
        return self.text[:1].isalpha() or self.text[:1] == "_"


def tokenize(src: str) -> list[Tok]:
    """Identifiers, `::` and punctuation of Rust source, without comments, strings, chars,
    lifetimes and numbers."""
    toks: list[Tok] = []
    i, n, line = 0, len(src), 1

    def skip_string(j: int, hashes: int | None) -> int:
        """j is just past the opening quote; returns the index past the closing one."""
        nonlocal line
        while j < n:
            c = src[j]
            if c == "\n":
                line += 1
            if hashes is None:
                if c == "\\":
                    if j + 1 < n and src[j + 1] == "\n":
                        line += 1
                    j += 2
                    continue
                if c == '"':
                    return j + 1
            elif c == '"' and src[j + 1 : j + 1 + hashes] == "#" * hashes:
                return j + 1 + hashes
            j += 1
        return j

    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
        elif c == '"':
            i = skip_string(i + 1, None)
        elif c == "'":
            if src[i + 1 : i + 2] == "\\":
                j = i + 2
                while j < n and src[j] != "'":
                    j += 1
                i = j + 1
            elif src[i + 2 : i + 3] == "'":
                i += 3
            else:  # a lifetime or a label
                i += 1
                while i < n and (src[i].isalnum() or src[i] == "_"):
                    i += 1
        elif c.isdigit():
            while i < n and (src[i].isalnum() or src[i] == "_"):
                i += 1
            if src[i : i + 1] == "." and src[i + 1 : i + 2].isdigit():
                i += 1
                while i < n and (src[i].isalnum() or src[i] == "_"):
                    i += 1
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            word = src[i:j]
            if word in ("r", "br", "b", "cr", "c") and j < n and src[j] in "\"#'":
                if src[j] == "'" and word == "b":  # b'x'
                    k = j + 1
                    if src[k : k + 1] == "\\":
                        k += 1
                    k += 1
                    while k < n and src[k] != "'":
                        k += 1
                    i = k + 1
                    continue
                if src[j] == '"':
                    i = skip_string(j + 1, None if word in ("b", "c") else 0)
                    continue
                k = j
                while k < n and src[k] == "#":
                    k += 1
                if src[k : k + 1] == '"' and word in ("r", "br", "cr"):
                    i = skip_string(k + 1, k - j)
                    continue
                if word == "r" and k == j + 1:  # raw identifier r#name
                    m = k
                    while m < n and (src[m].isalnum() or src[m] == "_"):
                        m += 1
                    toks.append(Tok(src[k:m], line))
                    i = m
                    continue
            toks.append(Tok(word, line))
            i = j
        elif src.startswith("::", i):
            toks.append(Tok("::", line))
            i += 2
        else:
            toks.append(Tok(c, line))
            i += 1
    return toks


@dataclass
class Ref:
    """A path as written, in the module it was written in."""

    module: Path_
    segs: Path_
    line: int
    in_use: bool
    public: bool = False


@dataclass
class Parsed:
    """What one file declares and references."""

    refs: list[Ref] = field(default_factory=list)
    # module -> child module names declared in it (file or inline), test-only ones apart
    children: dict[Path_, set[str]] = field(default_factory=dict)
    test_children: dict[Path_, set[str]] = field(default_factory=dict)
    # module -> exported name -> path as written (relative to that module)
    exports: dict[Path_, dict[str, Path_]] = field(default_factory=dict)
    inline: set[Path_] = field(default_factory=set)


def is_cfg_test(toks: list[Tok], i: int) -> int:
    """If toks[i:] starts `#[cfg(test)]` or `#![cfg(test)]`, the index past it, else 0."""
    j = i + 1
    if j < len(toks) and toks[j].text == "!":
        j += 1
    want = ["[", "cfg", "(", "test", ")", "]"]
    if [t.text for t in toks[j : j + len(want)]] == want:
        return j + len(want)
    return 0


def skip_item(toks: list[Tok], i: int) -> int:
    """The index past the item starting at toks[i]: its `;` or its `{...}` block."""
    depth = 0
    while i < len(toks):
        t = toks[i].text
        if t == "#" and i + 1 < len(toks) and toks[i + 1].text == "[" and depth == 0:
            # another attribute on the same item
            k, d = i + 1, 0
            while k < len(toks):
                d += {"[": 1, "]": -1}.get(toks[k].text, 0)
                k += 1
                if d == 0:
                    break
            i = k
            continue
        if t in "([":
            depth += 1
        elif t in ")]":
            depth -= 1
        elif t == ";" and depth == 0:
            return i + 1
        elif t == "{" and depth == 0:
            d = 0
            while i < len(toks):
                d += {"{": 1, "}": -1}.get(toks[i].text, 0)
                i += 1
                if d == 0:
                    return i
        i += 1
    return i


def parse_use_tree(toks: list[Tok], i: int, prefix: Path_) -> tuple[int, list[tuple[Path_, str]]]:
    """Parses one use tree at toks[i]; returns (index past it, [(path, bound name)])."""
    segs = list(prefix)
    out: list[tuple[Path_, str]] = []
    if i < len(toks) and toks[i].text == "::":
        i += 1
    while i < len(toks):
        t = toks[i].text
        if t == "{":
            i += 1
            while i < len(toks) and toks[i].text != "}":
                i, sub = parse_use_tree(toks, i, tuple(segs))
                out += sub
                if i < len(toks) and toks[i].text == ",":
                    i += 1
            return i + 1, out
        if t == "*":
            return i + 1, [(tuple(segs), "*")]
        if not toks[i].ident:
            break
        if t == "self" and prefix and len(segs) == len(prefix):
            i += 1  # `{self, ...}`: the prefix itself
        else:
            segs.append(t)
            i += 1
        if i < len(toks) and toks[i].text == "::":
            i += 1
            continue
        break
    name = segs[-1] if segs else ""
    if i + 1 < len(toks) and toks[i].text == "as":
        name = toks[i + 1].text
        i += 2
    return i, [(tuple(segs), name)]


def parse(src: str, module: Path_) -> Parsed:
    """The modules, re-exports and references of one file whose module path is `module`."""
    toks = tokenize(src)
    p = Parsed()
    p.children.setdefault(module, set())
    stack: list[tuple[Path_, int]] = []  # inline modules: (path, brace depth at their `{`)
    depth = 0
    i = 0
    # `#![cfg(test)]` at the top: the whole file is test code
    if toks and toks[0].text == "#" and is_cfg_test(toks, 0) and toks[1].text == "!":
        return p

    def cur() -> Path_:
        return stack[-1][0] if stack else module

    while i < len(toks):
        t = toks[i]
        if t.text == "#":
            end = is_cfg_test(toks, i)
            if end:
                # a test-only item: note a test module's name, skip the item
                k = end
                while k < len(toks) and toks[k].text in ("pub", "(", "crate", "super", ")"):
                    k += 1
                if k + 1 < len(toks) and toks[k].text == "mod":
                    p.test_children.setdefault(cur(), set()).add(toks[k + 1].text)
                i = skip_item(toks, end)
                continue
        if t.text == "{":
            depth += 1
        elif t.text == "}":
            if stack and stack[-1][1] == depth:
                stack.pop()
            depth -= 1
        elif t.text == "mod" and i + 1 < len(toks) and toks[i + 1].ident:
            name = toks[i + 1].text
            if i + 2 < len(toks) and toks[i + 2].text == "{":
                p.children.setdefault(cur(), set()).add(name)
                child = cur() + (name,)
                p.inline.add(child)
                p.children.setdefault(child, set())
                depth += 1
                stack.append((child, depth))
                i += 3
                continue
            p.children.setdefault(cur(), set()).add(name)
            i += 2
            continue
        elif t.text == "use" and (i == 0 or toks[i - 1].text != "::"):
            public = i > 0 and toks[i - 1].text in ("pub", ")")
            end, leaves = parse_use_tree(toks, i + 1, ())
            for segs, name in leaves:
                if segs:
                    p.refs.append(Ref(cur(), segs, t.line, True, public))
                    if public and name not in ("*", "self", "_"):
                        p.exports.setdefault(cur(), {})[name] = segs
            i = end
            continue
        elif t.ident and i + 1 < len(toks) and toks[i + 1].text == "::":
            prev = toks[i - 1].text if i else ""
            if prev not in ("::", "$", "."):
                segs = [t.text]
                j = i + 1
                while j + 1 < len(toks) and toks[j].text == "::" and toks[j + 1].ident:
                    segs.append(toks[j + 1].text)
                    j += 2
                p.refs.append(Ref(cur(), tuple(segs), t.line, False))
                i = j
                continue
        i += 1
    return p


def absolute(module: Path_, segs: Path_, children: dict[Path_, set[str]]) -> Path_ | None:
    """The crate-absolute form of a path written in `module`, or None when it leaves the
    crate (std, other crates, local items)."""
    if not segs:
        return None
    head = segs[0]
    if head == "crate":
        return segs[1:]
    if head in ("self", "super"):
        base = list(module)
        k = 0
        while k < len(segs) and segs[k] in ("self", "super"):
            if segs[k] == "super":
                if not base:
                    return None
                base.pop()
            k += 1
        return tuple(base) + segs[k:]
    if head in children.get(module, set()):
        return module + segs
    return None


@dataclass
class Crate:
    """The modules of one crate and the references between them."""

    modules: set[Path_]
    # (from module, to module, file, line)
    edges: list[tuple[Path_, Path_, str, int]]


def build(files: dict[str, tuple[Path_, str]]) -> Crate:
    """files: display name -> (module path, source)."""
    parsed = {name: (mod, parse(src, mod)) for name, (mod, src) in files.items()}
    children: dict[Path_, set[str]] = {}
    tests: set[Path_] = set()
    exports: dict[Path_, dict[str, Path_]] = {}
    for mod, p in parsed.values():
        for m, names in p.children.items():
            children.setdefault(m, set()).update(names)
        for m, names in p.test_children.items():
            children.setdefault(m, set()).update(names)
            tests.update(m + (nm,) for nm in names)
    modules = {mod for mod, _ in parsed.values()}
    for _, p in parsed.values():
        modules |= p.inline

    def under_test(m: Path_) -> bool:
        return any(m[: len(t)] == t for t in tests)

    modules = {m for m in modules if not under_test(m)}
    for _, p in parsed.values():
        for m, ex in p.exports.items():
            for nm, segs in ex.items():
                a = absolute(m, segs, children)
                if a is not None:
                    exports.setdefault(m, {})[nm] = a

    def resolve(a: Path_) -> Path_ | None:
        for _ in range(8):
            k = len(a)
            while k and a[:k] not in modules:
                k -= 1
            if k == 0 and () not in modules:
                return None
            mod = a[:k]
            if k < len(a) and a[k] in exports.get(mod, {}):
                target = exports[mod][a[k]]
                if target != a[: k + 1]:
                    a = target + a[k + 1 :]
                    continue
            return mod
        return a

    edges = []
    for name, (mod, p) in sorted(parsed.items()):
        if under_test(mod):
            continue
        for r in p.refs:
            if under_test(r.module):
                continue
            a = absolute(r.module, r.segs, children)
            if a is None:
                continue
            if r.in_use and a and a[-1] == "self":
                a = a[:-1]
            dst = resolve(a)
            if dst is None or dst == r.module:
                continue
            if r.public and dst[: len(r.module)] == r.module:
                continue  # a facade re-exporting its own sub-modules' items
            edges.append((r.module, dst, name, r.line))
    return Crate(modules, edges)


def load(crate_dir: Path, crate_name: str) -> dict[str, tuple[Path_, str]]:
    """The Rust files of one crate's src/, by their path relative to the repository."""
    files = {}
    for f in sorted(crate_dir.rglob("*.rs")):
        rel = f.relative_to(crate_dir).with_suffix("").parts
        if rel in (("lib",), ("main",)):
            mod: Path_ = ()
        elif rel[-1] == "mod":
            mod = tuple(rel[:-1])
        else:
            mod = tuple(rel)
        if rel[:1] == ("bin",):
            continue
        try:
            shown = str(f.relative_to(ROOT))
        except ValueError:
            shown = str(f)
        files[shown] = (mod, f.read_text())
    return files


def graphs(crate: Crate, depth: int) -> list[dict[str, dict[str, tuple[str, int]]]]:
    """For each level 1..depth: node -> node -> first example (file, line)."""
    out = []
    for level in range(1, depth + 1):
        g: dict[str, dict[str, tuple[str, int]]] = {}
        for src, dst, f, line in crate.edges:
            if not src or not dst:
                continue  # the crate root is no node
            if len(src) < level - 1 or src[: level - 1] != dst[: level - 1]:
                continue
            a, b = "::".join(src[:level]), "::".join(dst[:level])
            if a == b:
                continue
            ex = g.setdefault(a, {})
            if b not in ex or (f, line) < ex[b]:
                ex[b] = (f, line)
            g.setdefault(b, {})
        out.append(g)
    return out


def sccs(g: dict[str, dict[str, object]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def find_cycles(crate_name: str, crate: Crate, depth: int) -> list[tuple[str, list[str]]]:
    """(allow-list key, lines describing the cycle's edges) for every cycle."""
    found = []
    for g in graphs(crate, depth):
        for comp in sccs(g):
            key = f"{crate_name}: {' '.join(comp)}"
            lines = []
            members = set(comp)
            for a in comp:
                for b, (f, line) in sorted(g[a].items()):
                    if b in members:
                        lines.append(f"    {a} -> {b}    ({f}:{line})")
            found.append((key, lines))
    return found


def read_known(path: Path) -> list[str]:
    if not path.exists():
        return []
    keys = []
    for raw in path.read_text().splitlines():
        s = raw.split("#", 1)[0].strip()
        if s:
            keys.append(" ".join(s.split()))
    return keys


def check(depth: int, show_edges: bool) -> int:
    known = read_known(KNOWN)
    problems = 0
    seen = set()
    for crate_name, d in CRATES.items():
        crate = build(load(d, crate_name))
        if show_edges:
            for level, g in enumerate(graphs(crate, depth), 1):
                print(f"{crate_name} level {level}:")
                for a in sorted(g):
                    for b, (f, line) in sorted(g[a].items()):
                        print(f"    {a} -> {b}    ({f}:{line})")
        for key, lines in find_cycles(crate_name, crate, depth):
            seen.add(key)
            allowed = key in known
            print(("known cycle " if allowed else "CYCLE ") + key)
            print("\n".join(lines))
            problems += not allowed
    for key in known:
        if key not in seen:
            print(
                f"GONE {key}: this cycle no longer exists; remove its line from "
                f"{KNOWN.relative_to(ROOT)}"
            )
            problems += 1
    if problems:
        print(
            f"module_cycles: {problems} problem(s); break the new cycles (move the shared item "
            f"to the module both sides may depend on) rather than listing them"
        )
        return 1
    print(f"module_cycles: no new cycles ({len(seen)} known)")
    return 0


def self_test() -> int:
    fails = []

    def expect(what: str, got: object, want: object) -> None:
        if got != want:
            fails.append(f"{what}: got {got!r}, want {want!r}")

    src = r'''
//! doc: crate::x::Y is not a reference
/* block /* nested crate::x */ still comment */
use crate::a::{self, b::{C, D as E}, f::*};
pub use super::g::H;
use std::fmt;
mod child;
#[cfg(test)]
mod tests { use crate::t::T; fn f() { crate::t::u(); } }
#[cfg(test)]
mod props;
pub mod inner { pub fn f() { super::child::go(); crate::k::v(); } }
fn f<'a>(s: &'a str) -> char {
    let _ = "crate::s::S in a string";
    let _ = r#"crate::raw::R "quoted""#;
    let _ = b'x';
    child::run();
    crate::m::n::p(x.crate_like::q);
    $crate::macro_only::z();
    'c'
}
'''
    toks = [t.text for t in tokenize(src)]
    expect("comments and strings dropped", {"raw", "S", "R", "Y", "nested"} & set(toks), set())
    p = parse(src, ("top", "here"))
    refs = sorted((r.module, r.segs) for r in p.refs)
    here = ("top", "here")
    expect(
        "references",
        refs,
        sorted(
            [
                (here, ("crate", "a")),
                (here, ("crate", "a", "b", "C")),
                (here, ("crate", "a", "b", "D")),
                (here, ("crate", "a", "f")),
                (here, ("super", "g", "H")),
                (here, ("std", "fmt")),
                (here, ("child", "run")),
                (here, ("crate", "m", "n", "p")),
                (here + ("inner",), ("super", "child", "go")),
                (here + ("inner",), ("crate", "k", "v")),
            ]
        ),
    )
    expect("children", p.children[here], {"child", "inner"})
    expect("test children", p.test_children[here], {"props", "tests"})
    expect("exports", p.exports[here], {"H": ("super", "g", "H")})
    kids = {here: {"child", "inner"}}
    expect("super", absolute(here, ("super", "g", "H"), kids), ("top", "g", "H"))
    expect("child", absolute(here, ("child", "run"), kids), ("top", "here", "child", "run"))
    expect("extern", absolute(here, ("std", "fmt"), kids), None)

    files = {
        "lib.rs": ((), "pub mod a; pub mod b; pub mod c; pub use a::Thing;"),
        "a/mod.rs": (("a",), "mod x; mod y; pub use x::Thing; pub struct R; fn f() { x::go(); }"),
        "a/x.rs": (("a", "x"), "use super::y::Y; pub struct Thing;"),
        "a/y.rs": (("a", "y"), "pub struct Y; fn f() { super::R; }"),
        "b.rs": (("b",), "use crate::Thing; use crate::c::Z;"),
        "c.rs": (("c",), "pub struct Z; fn g() { crate::b::h(); }"),
        "d.rs": (("d",), "#![cfg(test)]\nuse crate::a::R;"),
    }
    crate = build(files)
    edges = sorted((a, b) for a, b, _, _ in crate.edges)
    expect(
        "edges (re-exports followed)",
        edges,
        sorted(
            [
                (("a",), ("a", "x")),
                (("a", "x"), ("a", "y")),
                (("a", "y"), ("a",)),
                (("b",), ("a", "x")),
                (("b",), ("c",)),
                (("c",), ("b",)),
            ]
        ),
    )
    cycles = [k for k, _ in find_cycles("t", crate, 2)]
    expect("cycles", cycles, ["t: b c", "t: a a::x a::y"])
    expect("acyclic", sccs({"p": {"q": 1}, "q": {"r": 1}, "r": {}}), [])
    expect("two sccs", sccs({"p": {"q": 1}, "q": {"p": 1}, "r": {"s": 1}, "s": {"r": 1}}),
           [["p", "q"], ["r", "s"]])
    for f in fails:
        print("self-test FAILED " + f)
    if not fails:
        print("module_cycles self-test: ok")
    return 1 if fails else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--self-test", action="store_true", help="check the parser and cycle finder")
    ap.add_argument("--depth", type=int, default=2, help="levels of the module tree to check")
    ap.add_argument("--edges", action="store_true", help="print every edge of each level")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    return check(args.depth, args.edges)


if __name__ == "__main__":
    sys.exit(main())
