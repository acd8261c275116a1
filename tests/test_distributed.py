"""``treelm train`` under torchrun: 2 CPU processes (gloo) end with identical weights."""

import os
import socket
import subprocess
import sys

from treelm.rundir.files import read_metrics


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_ddp_keeps_ranks_identical(tmp_path, root):
    run = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
           "-m", "treelm.cli", "train", "--config", "configs/tiny-lm.yaml", "--out", str(run),
           "--quiet", "train.epochs=2", "train.threads=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = read_metrics(run, "done")[-1]
    assert done["event"] == "done"
    digests = done["rank_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    # both ranks trained: each saw its half of the stream, the tokens count both
    assert done["tokens"] > 0 and done["epochs"] == 2
