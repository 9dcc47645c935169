"""``%%remote --timeout`` names the cell that timed out, not the ``bash -s`` that runs it."""
from __future__ import annotations

import pytest

from kit.errors import CommandTimeout
from kit.magics import RemoteMagics


def test_a_timed_out_cell_is_named_by_its_first_line():
    magics = RemoteMagics(shell=None)
    with pytest.raises(CommandTimeout) as e:
        magics.remote("local --timeout 0.5", "# wait for the engine\nsleep 30\necho never\n")
    msg = str(e.value)
    assert "%%remote cell 'sleep 30 ...'" in msg and "bash -s" not in msg and "timed out after 0.5 s" in msg
    assert e.value.cmd.startswith("# wait for the engine")
