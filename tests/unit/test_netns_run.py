"""p4netem.lab.netns.run (what p4netem_lab's run() and every lab's commands go through): a command
whose output is not UTF-8 still returns its text (undecodable bytes replaced) and its status."""

from __future__ import annotations

from p4netem.lab.netns import run


def test_binary_output_is_text_not_a_decode_error():
    done = run(["printf", "ok\\377\\376end"], check=False)
    assert done.returncode == 0
    assert done.stdout == "ok\ufffd\ufffdend"
