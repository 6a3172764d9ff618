"""Docstring lines per code line, per package of kbserver (for docs/architecture.md).

Usage: python scripts/docstring_ratio.py [ROOT]   (ROOT defaults to this checkout)
A docstring line is a line of a module, class or function docstring; a code line is any other
line that is neither blank nor only a comment.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections import defaultdict
from pathlib import Path


def _counts(source: str) -> tuple[int, int]:
    tree = ast.parse(source)
    doc: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    end = body[0].end_lineno or body[0].lineno
                    doc.update(range(body[0].lineno, end + 1))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.ENDMARKER:
            continue
        code.update(range(tok.start[0], tok.end[0] + 1))
    return len(doc), len(code - doc)


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "kbserver"
    docs: dict[str, int] = defaultdict(int)
    code: dict[str, int] = defaultdict(int)
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        package = "/".join(
            rel.parts[:2] if rel.parts[0] == "services" and len(rel.parts) > 2 else rel.parts[:1]
        )
        package = package if len(rel.parts) > 1 else "(top)"
        d, c = _counts(path.read_text(encoding="utf-8"))
        docs[package] += d
        code[package] += c
    print(f"{'package':<20} {'doc':>6} {'code':>6} {'doc/code':>9}")
    for package in sorted(docs):
        ratio = docs[package] / max(code[package], 1)
        print(f"{package:<20} {docs[package]:>6} {code[package]:>6} {ratio:>9.3f}")
    total_d, total_c = sum(docs.values()), sum(code.values())
    print(f"{'all':<20} {total_d:>6} {total_c:>6} {total_d / max(total_c, 1):>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
