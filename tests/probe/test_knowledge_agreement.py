"""The probe's bootstrap runs inside the user's processes with the standard library only; it
names no framework of its own: what tells the runtimes apart comes from the knowledge
records (``knowledge.runtimes.bootstrap_tables``), as a JSON file the probe writes for the
processes it starts (GPUDOCTOR_TABLES), or through ``configure`` in gpudoctor's own process."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from gpudoctor.knowledge.registry import RECORDS
from gpudoctor.knowledge.runtimes import RUNTIMES, bootstrap_tables
from gpudoctor.probe import launch

BOOTSTRAP = Path(__file__).resolve().parents[2] / "gpudoctor" / "probe" / "bootstrap" / "sitecustomize.py"


def test_the_bootstrap_names_no_framework() -> None:
    roots = {module.split(".", 1)[0] for record in RECORDS for module in record.modules}
    strings = {node.value for node in ast.walk(ast.parse(BOOTSTRAP.read_text(encoding="utf-8")))
               if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert {s for s in strings if s.split(".", 1)[0] in roots} == set()


def test_the_tables_watch_every_framework_and_see_each_runtime_the_records_say_is_seen() -> None:
    tables = bootstrap_tables()
    roots = {module.split(".", 1)[0] for record in RECORDS for module in record.modules}
    roots |= {alias.split(".", 1)[0] for record in RECORDS for alias, _ in record.aliases}
    assert set(tables["gpu_modules"]) == roots
    assert [entry[0] for entry in tables["runtimes"]] == [r.id.rstrip(":") for r in RUNTIMES if r.seen is not None]
    assert json.loads(json.dumps(tables)) == tables  # (what the probe writes for the bootstrap)


# A child that imports the bootstrap under its own name, as a supervised interpreter does,
# with stand-ins in sys.modules for what each runtime's record says the bootstrap reads.
CHILD = textwrap.dedent("""\
    import json, sys, types
    tables = json.load(open(sys.argv[1]))
    for name, module, path, test in tables["runtimes"]:
        holder = sys.modules.setdefault(module, types.ModuleType(module))
        for attribute in path[:-1]:
            inner = types.SimpleNamespace()
            setattr(holder, attribute, inner)
            holder = inner
        if path:
            setattr(holder, path[-1], {"cpu": 1} if test == "keys" else True)
    import sitecustomize
    print(json.dumps(sitecustomize.initialized_runtimes()))
""")


def test_a_started_process_sees_each_runtime_from_the_file_the_probe_writes(tmp_path: Path) -> None:
    workdir = launch.Workdir(tmp_path)
    env = launch.child_environment(workdir, "token")
    assert Path(env["GPUDOCTOR_TABLES"]) == workdir.tables
    env["GPUDOCTOR_EVENTS"] = ""  # (nothing recorded: only the detection is asked)
    done = subprocess.run([sys.executable, "-c", CHILD, str(workdir.tables)], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    expected = [("jax:cpu" if entry[3] == "keys" else entry[0]) for entry in bootstrap_tables()["runtimes"]]
    assert seen == expected, done.stderr


def test_without_tables_the_bootstrap_sees_nothing_and_fails_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(BOOTSTRAP.parent), "GPUDOCTOR_TABLES": str(tmp_path / "missing.json")}
    done = subprocess.run([sys.executable, "-c", "import sitecustomize; print(sitecustomize.initialized_runtimes())"],
                          env=env, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
