"""``treelm train`` under torchrun: 2 CPU processes (gloo) end with identical weights; more
processes than GPUs on CUDA is a one-line error."""

import os
import socket
import subprocess
import sys

import pytest
import torch

from treelm.errors import TreelmError
from treelm.rundir.files import read_metrics
from treelm.train import distributed as D


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_process_ddp_keeps_ranks_identical(tmp_path, root):
    run = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
           "-m", "treelm.cli", "train", "--config", "configs/tiny-lm.yaml", "--out", str(run),
           "--quiet", "train.epochs=2", "train.threads=1",
           "train.device=cpu"]      # on a one-GPU machine, auto would put both ranks on CUDA
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = read_metrics(run, "done")[-1]
    assert done["event"] == "done"
    digests = done["rank_digests"]
    assert len(digests) == 2 and digests[0] == digests[1]
    # both ranks trained: each saw its half of the stream, the tokens count both
    assert done["tokens"] > 0 and done["epochs"] == 2


def test_more_processes_than_gpus_is_one_line(monkeypatch):
    """Checked before the process group is joined, so no rank hangs waiting for the others."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(TreelmError) as e:
        D.setup(torch.device("cuda"))
    msg = str(e.value)
    assert "\n" not in msg and "2 processes" in msg and "1 CUDA device" in msg
    assert "train.device=cpu" in msg
