"""The ``%%remote`` cell magic inside a notebook executed by a real kernel (nbclient), against the real sshd."""
from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.ssh


def _stream(cell, name: str) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == name)


def test_remote_magic_in_an_executed_notebook(sshd, tmp_path):
    opts = f"-i {sshd.key_path} --known-hosts {sshd.known_hosts} --no-ssh-config"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext kit"),
        nbformat.v4.new_code_cell(
            f"%%remote {sshd.target} {opts} --timeout 30\n"
            'echo "hello from $(whoami)"\n'
            "for i in 1 2 3; do echo line $i; done\n"
            "echo to-stderr >&2\n"
            "printf '%s\\n' \"$0\"\n"),
        nbformat.v4.new_code_cell("print(_remote.exit_code, repr(_remote.stdout.splitlines()[0]))"),
        nbformat.v4.new_code_cell(f"%%remote {sshd.target} {opts} --no-raise-error\necho partial; exit 5"),
        nbformat.v4.new_code_cell("print('exit', _remote.exit_code)"),
        nbformat.v4.new_code_cell("import kit\nh = kit.connect('local')"),
        nbformat.v4.new_code_cell("%%remote h\necho local-$((6*7))"),
        nbformat.v4.new_code_cell(f"%%remote {sshd.target} {opts}\nexit 3"),
    ]
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    cells = nb.cells
    assert _stream(cells[1], "stdout") == f"hello from {sshd.user}\nline 1\nline 2\nline 3\nbash\n"
    assert _stream(cells[1], "stderr") == "to-stderr\n"
    assert _stream(cells[2], "stdout") == f"0 'hello from {sshd.user}'\n"
    assert _stream(cells[3], "stdout") == "partial\n" and "exited 5" in _stream(cells[3], "stderr")
    assert _stream(cells[4], "stdout") == "exit 5\n"
    assert _stream(cells[6], "stdout") == "local-42\n"
    errors = [o for o in cells[7].outputs if o.output_type == "error"]
    assert errors and errors[0].ename == "CommandFailed" and "exited 3" in errors[0].evalue
    assert not any(o.output_type == "error" for c in cells[:7] for o in c.outputs)
