"""The code blocks of the reference design's documents (``tensor_debug.md``,
``memory_debug.md``, ``api.md``), read at test time, never copied into this repository.

The documents are looked for in the directory named by ``TCGD_REFERENCE_DOCS``, by
default ``../shared/seed/reference-0.2.0`` beside the repository root. Each fenced block
becomes a :class:`Block` (document, first line of its text, fence language, the heading
it sits under, its text). :func:`classify` sorts every block by a fixed rule:

- ``python``: a Python block that is a program (it parses and is not a declaration);
- ``shell``: a ``bash``/``console``/``sh`` block of commands;
- ``cli-synopsis``: a ``text`` block whose lines are command synopses (``tcgd-...``);
- ``signature``: not runnable, a signature listing (a Python block that does not parse,
  declares classes with annotations only, or lists calls with placeholder arguments);
- ``illustration``: not runnable, a diagram, formula, file layout or JSON shape.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

DOCUMENTS = ("tensor_debug.md", "memory_debug.md", "api.md")
ENVIRONMENT_VARIABLE = "TCGD_REFERENCE_DOCS"
REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_DIRECTORY = REPOSITORY.parent / "shared" / "seed" / "reference-0.2.0"
# Inside the checkout: where a copy travels to the GPU machine (never committed).
CHECKOUT_DIRECTORY = REPOSITORY / "shared" / "seed" / "reference-0.2.0"

RUNNABLE_KINDS = ("python", "shell", "cli-synopsis")
NOT_RUNNABLE_REASONS = {
    "signature": "not runnable: signature listing",
    "illustration": "not runnable: illustration (diagram, formula, file layout or JSON shape)",
}

_FENCE = re.compile(r"^\s*```\s*([\w+-]*)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_SHELL_LANGUAGES = {"bash", "console", "sh", "shell"}


def documents_directory() -> Path:
    """Where the reference documents are read from (the directory may be absent):
    ``TCGD_REFERENCE_DOCS``, else ``../shared/seed/reference-0.2.0`` beside the
    repository, else ``shared/seed/reference-0.2.0`` inside it."""
    given = os.environ.get(ENVIRONMENT_VARIABLE)
    if given:
        return Path(given)
    if not DEFAULT_DIRECTORY.is_dir() and CHECKOUT_DIRECTORY.is_dir():
        return CHECKOUT_DIRECTORY
    return DEFAULT_DIRECTORY


def missing_reason(directory: Path | None = None) -> str | None:
    """Why the documents cannot be read (``None`` when every one is there)."""
    directory = documents_directory() if directory is None else directory
    absent = [name for name in DOCUMENTS if not (directory / name).is_file()]
    if not absent:
        return None
    return (
        f"the reference documents {', '.join(absent)} are not in {directory} "
        f"(set {ENVIRONMENT_VARIABLE} to the directory holding them)"
    )


@dataclass(frozen=True)
class Block:
    """One fenced block: ``line`` is the 1-based line of its opening fence."""

    document: str
    line: int
    language: str
    heading: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}"

    @property
    def digest(self) -> str:
        """A short hash of the text with all whitespace runs made one space, so that
        re-indenting or re-wrapping the block keeps it."""
        normalized = " ".join(self.text.split())
        return hashlib.sha256(normalized.encode()).hexdigest()[:10]

    @property
    def key(self) -> tuple[str, str]:
        return (self.document, self.digest)

    @property
    def kind(self) -> str:
        return classify(self)

    def first_line(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")


def read_blocks(document: str, directory: Path | None = None) -> list[Block]:
    """Every fenced block of one document, in order."""
    directory = documents_directory() if directory is None else directory
    lines = (directory / document).read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    heading = ""
    index = 0
    while index < len(lines):
        line = lines[index]
        title = _HEADING.match(line)
        if title:
            heading = title.group(2)
        fence = _FENCE.match(line)
        if fence:
            end = index + 1
            while end < len(lines) and not _FENCE.match(lines[end]):
                end += 1
            if end == len(lines):
                raise ValueError(f"{document}:{index + 1}: a code fence that is never closed")
            text = "\n".join(lines[index + 1 : end])
            blocks.append(Block(document, index + 1, fence.group(1).lower(), heading, text))
            index = end
        index += 1
    return blocks


def all_blocks(directory: Path | None = None) -> list[Block]:
    return [block for name in DOCUMENTS for block in read_blocks(name, directory)]


# ------------------------------------------------------------------ classification
def _is_declaration(tree: ast.Module) -> bool:
    """Only classes whose bodies hold annotations, docstrings/``...`` and stub methods."""

    def stub(node: ast.stmt) -> bool:
        if isinstance(node, ast.AnnAssign | ast.Pass):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return True
        if isinstance(node, ast.FunctionDef):
            return all(stub(inner) for inner in node.body)
        return False

    return bool(tree.body) and all(
        isinstance(node, ast.ClassDef) and all(stub(inner) for inner in node.body)
        for node in tree.body
    )


def _is_call_listing(tree: ast.Module) -> bool:
    """Bare expressions only, with a call whose arguments are placeholder names that
    nothing in the block binds (``advanced.normalize_pool_id(pool_id)``)."""
    if not tree.body or not all(isinstance(node, ast.Expr) for node in tree.body):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
            if any(isinstance(argument, ast.Name) for argument in arguments):
                return True
    return False


def is_synopsis(text: str) -> bool:
    commands = [line for line in join_continuations(text) if line.strip()]
    return bool(commands) and all(line.split()[0].startswith("tcgd") for line in commands)


def classify(block: Block) -> str:
    """The block's kind (see the module's docstring)."""
    if block.language == "python":
        try:
            tree = ast.parse(block.text)
        except SyntaxError:
            return "signature"
        if _is_declaration(tree) or _is_call_listing(tree):
            return "signature"
        return "python"
    if block.language in _SHELL_LANGUAGES:
        return "shell"
    if block.language in ("text", "") and is_synopsis(block.text):
        return "cli-synopsis"
    return "illustration"


# ------------------------------------------------------------------ shell commands
def join_continuations(text: str) -> list[str]:
    """The logical lines of a shell text: backslash continuations joined, prompts
    (``$ ``) and comments dropped."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not current and line.lstrip().startswith("$ "):
            line = line.lstrip()[2:]
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip() and not current.lstrip().startswith("#"):
            logical.append(" ".join(current.split()))
        current = ""
    if current.strip():
        logical.append(" ".join(current.split()))
    return logical


def commands(block: Block) -> list[list[str]]:
    """The argument vectors of a shell block, in order."""
    return [shlex.split(line) for line in join_continuations(block.text)]


def synopsis_flags(block: Block) -> list[tuple[str, str, list[str]]]:
    """(program, subcommand, its ``--flags``) for each synopsis line."""
    found = []
    for line in join_continuations(block.text):
        program, subcommand = line.split()[:2]
        found.append((program, subcommand, sorted(set(re.findall(r"--[a-z][a-z-]*", line)))))
    return found
