"""The wire names: one module both ends import, which loads nothing else."""

from __future__ import annotations

import ast
import subprocess
import sys

from promptprism.wire import names


def test_importing_the_wire_names_loads_nothing_but_the_names():
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import promptprism.wire.names\n"
        "print(sorted(set(sys.modules) - before))\n"
    )
    output = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded = set(ast.literal_eval(output.strip()))
    # Packaging shims (the editable-install finder) are not imports of ours.
    loaded = {name for name in loaded if not name.startswith("_") and name != "__editable__"}
    assert loaded <= {"promptprism", "promptprism.wire", "promptprism.wire.names"}, loaded


def test_every_name_is_a_plain_constant():
    constants = {key: value for key, value in vars(names).items() if not key.startswith("__")}
    assert constants, "no names at all"
    for key, value in constants.items():
        assert key.isupper(), key
        assert isinstance(value, (str, int, tuple)), key


def test_settings_are_not_wire_names():
    # Environment variables are read by the code that uses them (instrumentation, collector config).
    assert not [key for key in vars(names) if key.startswith(("ENV_", "CAPTURE_"))]
