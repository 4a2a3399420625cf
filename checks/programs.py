"""The files of one candidate's check program in a language other than Python: the candidate's code as written
(its line numbers kept, so errors name the user's lines), the checks (as data, or compiled in as small functions),
and the language's harness from checks/harness/. Pure text: nothing is built or run here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from checks import clike
from checks.check import TRUTHY, Check

HARNESS_DIR = Path(__file__).parent / "harness"


@dataclass(frozen=True)
class CheckProgram:
    """The files to write in the sandbox's working directory, and what the build or the run starts from."""

    files: dict[str, str]  # relative path -> text
    entry: str  # JavaScript: the script node runs; C++ and Rust: the source to compile; Java: the main class


@cache
def harness(name: str) -> str:
    return (HARNESS_DIR / name).read_text(encoding="utf-8")


def javascript(program: str, checks: list[Check], limit_s: float) -> CheckProgram:
    """The candidate as a script, the checks as data (evaluated by harness/check.js in the candidate's realm)."""
    payload = {
        "limit_ms": round(limit_s * 1000),
        "checks": [{"expression": c.expression, "expected": c.expected, "compare": c.compare} for c in checks],
    }
    return CheckProgram(
        {"candidate.js": program, "checks.json": json.dumps(payload), "check.js": harness("check.js")}, "check.js"
    )


_STDCXX = re.compile(r"^\s*#\s*include\s*<bits/stdc\+\+\.h>", re.MULTILINE)


def cpp_headers() -> dict[str, str]:
    """The headers a C++ check program starts with (one of the two rd_ ones), each precompiled where it can be."""
    return {
        "check.hpp": harness("check.hpp"),
        "rd_check.h": '#include "check.hpp"\n',
        "rd_stdcxx.h": '#include <bits/stdc++.h>\n#include "check.hpp"\n',  # what MultiPL-E's prompts include
    }


def cpp(program: str, checks: list[Check], limit_s: float, headers: str | None = None) -> CheckProgram:
    """One translation unit: the harness first (with <bits/stdc++.h> before it where the candidate includes that),
    the candidate (its own `main`, if any, renamed), then each check as a function. `headers` is the directory of
    cpp_headers() (precompiled there, so a build does not parse them again); None: they go beside the source."""
    functions = []
    for index, check in enumerate(checks):
        judged = (
            "static_cast<bool>(__rd_value)"
            if check.compare == TRUTHY
            else f"__rd::same(__rd_value, ({check.expected}\n))"
        )
        functions.append(
            f"static bool __rd_check_{index}(std::string& __rd_got) {{\n  auto&& __rd_value = ({check.expression}\n);\n"
            f"  __rd_got = __rd::show(__rd_value);\n  return {judged};\n}}\n"
        )
    names = ", ".join(f"__rd_check_{i}" for i in range(len(checks)))
    first = "rd_stdcxx.h" if _STDCXX.search(program) else "rd_check.h"
    source = (
        f'#include "{headers + "/" if headers else ""}{first}"\n'
        "#define main __rd_candidate_main\n"
        '#line 1 "candidate.cpp"\n'
        f"{program}\n"
        "#undef main\n"
        '#line 1 "checks.cpp"\n'
        + "".join(functions)
        + f"int main() {{ return __rd::run({{{names}}}, {round(limit_s * 1000)}); }}\n"
    )
    return CheckProgram({"checks.cpp": source, **({} if headers else cpp_headers())}, "checks.cpp")


_RUST_MAIN = re.compile(r"^(\s*(?:pub\s+)?fn\s+)main(\s*\()", re.MULTILINE)


def rust(program: str, checks: list[Check], limit_s: float) -> CheckProgram:
    """One crate: the candidate (its own `fn main`, if any, renamed), each check as a function, the harness."""
    functions = []
    for index, check in enumerate(checks):
        if check.compare == TRUTHY:
            body = f'let __rd_got: bool = {{ {check.expression}\n}};\n    (__rd_got, format!("{{:?}}", __rd_got))'
        else:
            body = (
                f"let __rd_got = {{ {check.expression}\n}};\n"
                f'    (__rd_got == {{ {check.expected}\n}}, format!("{{:?}}", __rd_got))'
            )
        functions.append(f"fn __rd_check_{index}() -> (bool, String) {{\n    {body}\n}}\n")
    names = ", ".join(f"__rd_check_{i}" for i in range(len(checks)))
    source = (
        _RUST_MAIN.sub(r"\1__rd_candidate_main\2", program)
        + "\n\n// --- the checks\n"
        + "".join(functions)
        + f"fn main() {{\n    __rd_run(&[{names}], {round(limit_s * 1000)});\n}}\n\n"
        + harness("check.rs")
    )
    return CheckProgram({"candidate.rs": source}, "candidate.rs")


_JAVA_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.MULTILINE)
_JAVA_IMPORT = re.compile(r"^\s*import\s+(?:static\s+)?[\w.]+(?:\.\*)?\s*;", re.MULTILINE)
_JAVA_TYPE = re.compile(
    r"\b(?:(public)\s+)?(?:(?:abstract|final|static|sealed|strictfp)\s+)*(?:class|interface|enum|record)\s+(\w+)"
)
JAVA_PACKAGE = "rd"  # the package a candidate without one is put in, so its classes can be imported statically
JAVATUPLES = ("Pair", "Triplet")  # what harness/javatuples stands in for, where org.javatuples is imported


def java(program: str, checks: list[Check], limit_s: float) -> CheckProgram:
    """The candidate in a package (a `package` line of its own, or `rd;` put before its first line), the braces it
    leaves open closed (a MultiPL-E prompt opens `class Problem {` and the candidate ends its method), and a class
    RdChecks that imports the candidate's classes' static members, so the checks call them as the examples do."""
    masked = clike.mask(program)  # declarations in comments and strings are not declarations
    declared = _JAVA_PACKAGE.search(masked)
    package = declared.group(1) if declared else JAVA_PACKAGE
    source = program if declared else f"package {JAVA_PACKAGE}; {program}"
    source += "\n" + "}" * clike.open_braces(source) + "\n"
    types = _top_level_types(program)
    public = next((name for name, is_public in types if is_public), None)
    imports = [m.group(0).strip() for m in _JAVA_IMPORT.finditer(masked)]
    functions = []
    for index, check in enumerate(checks):
        expected = "null" if check.compare == TRUTHY else f"({check.expected}\n)"
        functions.append(
            f"  static Object[] __rdCheck{index}() throws Throwable {{\n    Object got = ({check.expression}\n);\n"
            f"    return new Object[] {{got, {expected}}};\n  }}\n"
        )
    names = ", ".join(f"RdChecks::__rdCheck{i}" for i in range(len(checks)))
    truthy = ", ".join("true" if c.compare == TRUTHY else "false" for c in checks)
    checks_source = (
        f"package {package};\n"
        + "".join(line + "\n" for line in imports)
        + "import java.util.*;\n"
        + "".join(f"import static {package}.{name}.*;\n" for name, _ in types)
        + "public class RdChecks {\n"
        + "".join(functions)
        + "  public static void main(String[] args) throws Exception {\n"
        + f"    rdharness.Harness.run(new rdharness.Harness.Check[] {{{names}}}, new boolean[] {{{truthy}}}, "
        + f"{round(limit_s * 1000)}L);\n  }}\n}}\n"
    )
    files = {
        f"src/{public or 'Candidate'}.java": source,
        "src/RdChecks.java": checks_source,
        "src/rdharness/Harness.java": harness("Harness.java"),
    }
    if re.search(r"^\s*import\s+org\.javatuples\b", program, re.MULTILINE):
        files.update({f"src/javatuples/{name}.java": harness(f"javatuples/{name}.java") for name in JAVATUPLES})
    return CheckProgram(files, f"{package}.RdChecks")


def _top_level_types(program: str) -> list[tuple[str, bool]]:
    """(name, declared public) of each class, interface, enum or record at brace depth 0."""
    masked, found, depth = clike.mask(program), [], 0
    depth_at = []
    for char in masked:
        depth_at.append(depth)
        depth += char == "{"
        depth -= char == "}"
    for match in _JAVA_TYPE.finditer(masked):
        if depth_at[match.start()] == 0:
            found.append((match.group(2), bool(match.group(1))))
    return found
