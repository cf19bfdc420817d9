"""The package's layout (docs/architecture.md): stages in pipeline order, imports one way.

Every module of ``src/topicpulse`` belongs to one stage. A module may import its own stage and
the stages before it, never one after it: the store knows nothing of topics, topics nothing of
insight, nothing but the bot and the command line knows Telegram's side of things. The
generated test corpus stands apart: it uses the shared pieces only, and no stage imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "topicpulse"

# Pipeline order: a stage may import the ones before it. The store comes first because every
# stage reads or writes it (papers enter from sources, but the store does not know them).
STAGES = ("shared", "store", "sources", "topics", "insight", "delivery", "web", "bot", "cli")
SHARED_MODULES = {"__init__", "config", "heap", "logs", "models", "offload", "wording"}
APART = "synthetic"  # may import the shared pieces; nothing imports it
MAX_LINES = 450  # "split past ~400 lines by what it owns"


def stage_of(module: str) -> str:
    """``topicpulse.insight.ask`` → ``insight``; ``topicpulse.models`` → ``shared``."""
    parts = module.split(".")
    assert parts[0] == "topicpulse", module
    if len(parts) == 1 or parts[1] in SHARED_MODULES:
        return "shared"
    if parts[1] == "__main__":
        return "cli"
    if parts[1].startswith("__"):  # from topicpulse import __version__
        return "shared"
    return parts[1]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    relative = path.relative_to(package.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every ``topicpulse`` module the file imports (at the top, in functions, for typing)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("topicpulse")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "topicpulse":  # from topicpulse import insight, __version__
                found += [(node.lineno, f"topicpulse.{a.name}") for a in node.names]
            elif node.module.startswith("topicpulse."):
                found.append((node.lineno, node.module))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_belongs_to_a_known_stage() -> None:
    stray = [module_name(p) for p in MODULES if stage_of(module_name(p)) not in (*STAGES, APART)]
    assert not stray, f"modules outside the stages of docs/architecture.md: {stray}"


def test_the_top_level_holds_only_the_shared_pieces() -> None:
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= SHARED_MODULES | {"__main__"}, sorted(top - SHARED_MODULES)


def backward_imports(path: Path, package: Path = PACKAGE) -> list[str]:
    """The imports of ``path`` that break the one-way rule, one line each."""
    importer = module_name(path, package)
    own = stage_of(importer)
    wrong = []
    for line, target in imported_modules(path):
        theirs = stage_of(target)
        if own == APART:
            allowed = theirs in ("shared", APART)
        elif theirs == APART:
            allowed = False
        else:
            allowed = STAGES.index(theirs) <= STAGES.index(own)
        if not allowed:
            wrong.append(f"{importer} line {line}: {own} imports {target} ({theirs})")
    return wrong


def test_imports_run_one_way() -> None:
    wrong = [line for path in MODULES for line in backward_imports(path)]
    assert not wrong, "imports of a later stage:\n" + "\n".join(wrong)


def test_the_rule_catches_a_backward_import(tmp_path: Path) -> None:
    """The checker itself: a topics module importing delivery or the corpus is caught, one
    importing the store and its own stage is not."""
    package = tmp_path / "topicpulse"
    (package / "topics").mkdir(parents=True)
    module = package / "topics" / "bad.py"
    module.write_text(
        "from topicpulse.store import Store\n"
        "from topicpulse.topics import query\n"
        "from topicpulse.delivery.chats import Chats\n"
        "def later():\n"
        "    import topicpulse.bot.app\n"
        "    from topicpulse import synthetic\n"
    )
    assert backward_imports(module, package) == [
        "topicpulse.topics.bad line 3: topics imports topicpulse.delivery.chats (delivery)",
        "topicpulse.topics.bad line 5: topics imports topicpulse.bot.app (bot)",
        "topicpulse.topics.bad line 6: topics imports topicpulse.synthetic (synthetic)",
    ]


def test_modules_stay_small_enough_to_read_at_once() -> None:
    sizes = {module_name(p): len(p.read_text("utf-8").splitlines()) for p in MODULES}
    large = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not large, f"split these by what they own: {large}"
