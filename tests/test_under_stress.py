"""Issue 38's user errors, one line and exit 2 each: a batch size larger than the corpus allows,
a disk that fills up while a checkpoint is written (on a real small tmpfs where the test may mount
one, else with the write failing by ENOSPC/EDQUOT/EFBIG), and every verb's ``-o`` to a path that
cannot be written. After a full disk the run resumes from its last good checkpoint bit for bit."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import treelm.rundir.files as files_mod
from treelm.cli import main
from treelm.errors import TreelmError, check_output
from treelm.run import load_run
from treelm.rundir.checkpoint import read_pointer
from treelm.rundir.files import MetricsLog, RunFiles, read_metrics
from treelm.train.persistence import write_failure

CFG = "configs/tiny-lm.yaml"
# a checkpoint every 5 batches: the third save (step 10) is the one the disk refuses
COMMON = ["train.save_every_batches=5", "train.log_interval=5"]


def _train(run: Path, *overrides: str) -> int:
    return main(["train", "--config", CFG, "--out", str(run), "--quiet", *COMMON, *overrides])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("treelm: error: "), err
    return err[0]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in load_run(run, "last").model.state_dict().items()}


def _curve(run: Path) -> list[tuple]:
    """Every event (the precision line once), its step and loss, as the SIGKILL test has it."""
    losses = [(m, m.get("loss", m.get("best_valid_loss"))) for m in read_metrics(run)]
    return [(m["event"], m["step"], None if x is None else round(x, 6)) for m, x in losses]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run that every resumed one must equal."""
    run = tmp_path_factory.mktemp("reference") / "run"
    here = os.getcwd()
    os.chdir(Path(__file__).resolve().parents[1])
    try:
        assert _train(run) == 0
    finally:
        os.chdir(here)
    return run


def _same_as_reference(run: Path, reference: Path) -> None:
    assert _curve(run) == _curve(reference)
    wa, wb = _weights(reference), _weights(run)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def _no_leftovers(run: Path) -> None:
    """Only complete checkpoints: no temporary file anywhere, every ckpt/N pointed at."""
    assert not [p for p in run.rglob(".*.tmp")]
    ptr = read_pointer(run)
    assert {f"ckpt/{d.name}" for d in (run / "ckpt").iterdir()} <= {ptr["last"], ptr["best"]}
    load_run(run, "last")           # its last checkpoint reads


# ---------------------------------------------------------------- batch sizes
@pytest.mark.parametrize("override,key,largest", [
    ("train.batch_size=100000", "train.batch_size=100000", "1,902"),
    ("train.batch_size=1903", "train.batch_size=1903", "1,902"),  # one too many: no batch at all
    ("train.eval_batch_size=5000", "train.eval_batch_size=5000", "384"),
])
def test_batch_size_larger_than_the_corpus(tmp_path, root, capsys, override, key, largest):
    """The LM's training stream (5,707 tokens) makes columns of at least 3 tokens, its valid
    split (768) of at least 2: a larger batch size stops before anything is written."""
    os.chdir(root)
    run = tmp_path / "r"
    assert _train(run, override) == 2
    line = _one_line(capsys)
    assert key in line and f"the largest that fits is {largest}" in line
    assert not run.exists()
    assert _train(run, "train.batch_size=1902", "train.epochs=1") == 0    # the largest trains
    assert read_metrics(run, "done")[0]["tokens"] > 0


def test_eval_batch_size_larger_than_the_split(lm_run, root, capsys):
    os.chdir(root)
    assert main(["eval", str(lm_run), "--split", "test", "--batch-size", "100000"]) == 2
    line = _one_line(capsys)
    assert "--batch-size=100000" in line and "test set" in line and "largest that fits" in line
    assert main(["eval", str(lm_run), "--data", "tests/data/tiny.txt",
                 "--batch-size", "100000"]) == 2
    assert "tests/data/tiny.txt" in _one_line(capsys)


# ---------------------------------------------------------------- a full disk
def _fail_nth_write(monkeypatch, name: str, nth: int, code: int) -> None:
    """The ``nth`` write of the run's file ``name`` writes half its bytes, then fails with
    ``code``, as a disk that fills up mid-file does."""
    real, seen = files_mod.write_file, []

    def write(path: Path, data: bytes) -> None:
        if path.name == f".{name}.tmp":
            seen.append(path)
            if len(seen) == nth:
                path.write_bytes(data[: len(data) // 2])
                raise OSError(code, os.strerror(code))
        real(path, data)

    monkeypatch.setattr(files_mod, "write_file", write)


@pytest.mark.parametrize("name,code", [("model.safetensors", errno.ENOSPC),
                                       ("trainer.pt", errno.EDQUOT),
                                       ("checkpoint.json", errno.EFBIG)])
def test_full_disk_while_saving_then_resume(tmp_path, root, capsys, monkeypatch, reference,
                                            name, code):
    os.chdir(root)
    run = tmp_path / "r"
    _fail_nth_write(monkeypatch, name, 3, code)     # step 0 and step 5 saved, step 10 not
    assert _train(run) == 2
    line = _one_line(capsys)
    file = run / name if name == "checkpoint.json" else run / "ckpt" / "000003" / name
    assert f"{file}: {os.strerror(code)} ({errno.errorcode[code]})" in line
    assert f"the unfinished checkpoint {run / 'ckpt' / '000003'} was removed" in line
    assert f"the last good checkpoint is {run / 'ckpt' / '000002'} (step 5)" in line
    assert f"treelm train --resume {run}" in line
    assert not (run / "ckpt" / "000003").exists()
    assert read_pointer(run)["last"] == "ckpt/000002"
    _no_leftovers(run)
    monkeypatch.undo()                               # room again
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    _same_as_reference(run, reference)
    _no_leftovers(run)


@pytest.fixture
def small_fs(tmp_path):
    """A 4 MiB tmpfs of its own (needs root and ``mount``: skipped where not permitted)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if not shutil.which("mount"):
        pytest.skip("no mount command")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip()})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_full_disk_on_a_real_small_filesystem(small_fs, root, capsys, reference):
    """The kernel's ENOSPC, not a simulated one: the filesystem is filled so that it holds two
    checkpoints and not the third's weights; freeing the space lets ``--resume`` finish."""
    os.chdir(root)
    ckpt = _size(reference / "ckpt" / read_pointer(reference)["last"].split("/")[1])
    rest = _size(reference) - _size(reference / "ckpt")
    free = shutil.disk_usage(small_fs).free
    filler = small_fs / "filler"
    filler.write_bytes(b"\0" * (free - rest - int(2.5 * ckpt)))
    run = small_fs / "r"
    assert _train(run) == 2
    line = _one_line(capsys)
    assert "No space left on device (ENOSPC)" in line, line
    assert f"{run}/ckpt/" in line and "the last good checkpoint is" in line
    last = read_pointer(run)["last"]
    assert f"the last good checkpoint is {run / last}" in line
    _no_leftovers(run)
    filler.unlink()
    assert main(["train", "--resume", str(run), "--quiet"]) == 0
    _same_as_reference(run, reference)


def test_metrics_log_keeps_whole_lines_when_the_disk_is_full(tmp_path, monkeypatch):
    """A log line the disk takes only part of is cut back; the error names the log, and the
    run's line names its last good checkpoint (none here: the run has not saved one)."""
    files = RunFiles(tmp_path)
    log = MetricsLog(files)
    log.start()
    log.append({"event": "a"})
    before = files.metrics.read_bytes()

    def write(fd: int, data: bytes) -> int:
        if len(data) > 4:
            return os.write(fd, data[:4])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files_mod, "os", SimpleNamespace(**{**vars(os), "write": write}))
    with pytest.raises(OSError) as e:
        log.append({"event": "b"})
    monkeypatch.undo()
    assert e.value.filename == str(files.metrics) and e.value.errno == errno.ENOSPC
    assert files.metrics.read_bytes() == before and log.nbytes == len(before)
    failure = write_failure(tmp_path, e.value)
    assert isinstance(failure, TreelmError)
    assert str(failure).startswith(f"{files.metrics}: No space left on device (ENOSPC)")
    assert write_failure(tmp_path, OSError(errno.EIO, "I/O error")) is None   # not ours


# ---------------------------------------------------------------- outputs
def test_outputs_that_cannot_be_written(tmp_path, root, capsys):
    """``-o`` (every verb checks it with :func:`check_output` before any work): a directory, a
    parent that is a file, a missing folder under a file; a missing folder that can be made is
    fine and nothing is left behind by the check."""
    os.chdir(root)
    (tmp_path / "file").write_text("x")
    for out, says in [(tmp_path, "is a directory"),
                      (tmp_path / "file" / "t.png", "is not a directory"),
                      (tmp_path / "file" / "sub" / "t.png", "is not a directory")]:
        assert main(["plot-tree", "((a b) c)", "-o", str(out)]) == 2
        line = _one_line(capsys)
        assert str(out) in line and says in line
    fine = tmp_path / "new" / "deeper" / "t.png"
    check_output(str(fine), (".png",), "plot")
    assert not (tmp_path / "new").exists()          # the check made and removed the folders
    existing = tmp_path / "kept.png"
    existing.write_bytes(b"old")
    check_output(str(existing), (".png",), "plot")
    assert existing.read_bytes() == b"old"
    assert main(["plot-tree", "((a b) c)", "-o", str(fine)]) == 0
    assert fine.stat().st_size > 0


def test_the_output_check_leaves_nothing_behind_a_symlink(tmp_path, root, capsys):
    """``-o link.png`` where the link dangles: the check writes through it as the writer will,
    and removes the file it made at the link's end (the link, there before, stays); a link to a
    file keeps the file as it was; a link into a missing folder is refused, and makes nothing."""
    os.chdir(root)
    (tmp_path / "link.png").symlink_to("target.png")             # relative, dangling
    (tmp_path / "chain.png").symlink_to(tmp_path / "link.png")    # a link to that link
    (tmp_path / "kept.png").write_bytes(b"old")
    (tmp_path / "to-kept.png").symlink_to("kept.png")
    (tmp_path / "far.png").symlink_to("missing/x.png")
    before = sorted(os.listdir(tmp_path))
    for name in ("link.png", "chain.png", "to-kept.png"):
        check_output(str(tmp_path / name), (".png",), "plot")
    with pytest.raises(TreelmError, match="far.png: cannot write the plot"):
        check_output(str(tmp_path / "far.png"), (".png",), "plot")
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "kept.png").read_bytes() == b"old"
    assert main(["plot-tree", "((a b) c)", "-o", str(tmp_path / "chain.png")]) == 0
    assert (tmp_path / "target.png").stat().st_size > 0 and (tmp_path / "link.png").is_symlink()
    capsys.readouterr()


def test_output_on_a_read_only_filesystem(tmp_path, root, capsys):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mnt)],
                          capture_output=True, text=True) if shutil.which("mount") else None
    if made is None or made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        os.chdir(root)
        for out in (mnt / "t.png", mnt / "sub" / "t.png"):
            assert main(["gradflow", "--cells", "elman", "--length", "3", "--hidden", "4",
                         "-o", str(out)]) == 2
            line = _one_line(capsys)
            assert str(out) in line and "Read-only file system" in line
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_output_without_permission():
    """A folder the user may not write in (as root, checked in a child process that drops to
    ``nobody`` with ``setpriv``; pytest's own temporary folders are closed to others)."""
    top = Path(tempfile.mkdtemp(prefix="treelm-perm-"))
    try:
        top.chmod(0o755)
        locked = top / "locked"
        locked.mkdir(mode=0o555)
        locked.chmod(0o555)
        target = str(locked / "a" / "t.png")
        if os.geteuid() != 0:
            with pytest.raises(TreelmError, match="Permission denied"):
                check_output(target, (".png",), "plot")
            return
        if not shutil.which("setpriv"):
            pytest.skip("root, and no setpriv to drop privileges")
        code = ("from treelm.errors import check_output\n"
                f"check_output({target!r}, ('.png',), 'plot')")
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              sys.executable, "-c", code], capture_output=True, text=True,
                             cwd="/")
        if out.returncode != 0 and "setpriv:" in out.stderr:
            pytest.skip(f"setpriv cannot drop privileges here ({out.stderr.strip()})")
        assert out.returncode != 0 and "cannot write the plot (Permission denied)" in out.stderr
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_write_failing_after_the_checks_is_one_line(tmp_path, monkeypatch, capsys):
    """A disk that fills up while a verb writes (after ``check_output`` passed): one line naming
    the file, exit 2, no traceback."""
    import treelm.syntax.render as render

    out = tmp_path / "tree.png"

    def full_disk(tree, path, title=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(render, "plot_tree", full_disk)
    assert main(["plot-tree", "(a (b c))", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"treelm: error: {out}: No space left on device\n"


def test_only_a_full_disk_is_told_to_make_room(tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--config", CFG, "--out", str(run), "train.epochs=1", "--quiet",
                 "train.max_units=200"]) == 0
    inside = str(run / "ckpt" / "x")
    full = write_failure(run, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), inside))
    denied = write_failure(run, OSError(errno.EACCES, os.strerror(errno.EACCES), inside))
    assert full is not None and denied is not None
    assert "make room, then `treelm train --resume" in str(full)
    assert "(EACCES)" in str(denied) and "mend that, then `treelm train --resume" in str(denied)
    assert "make room" not in str(denied)


def test_force_leaves_nothing_of_the_replaced_run_in_the_pointer(tmp_path, monkeypatch):
    """``train --force`` over a finished run: from its step-0 checkpoint on (a kill right
    after it, before any validation), ``best`` and ``last`` name the new run's checkpoint."""
    from treelm.train.trainer import Trainer

    run = tmp_path / "run"
    base = ["train", "--config", CFG, "--out", str(run), "--quiet"]
    assert main([*base, "train.max_units=300"]) == 0
    old = read_pointer(run)
    monkeypatch.setattr(Trainer, "train", lambda self: None)    # stops after the step-0 save
    main([*base, "--force", "model.sizes=[12,16,12]"])
    ptr = read_pointer(run)
    assert ptr["model"] != old["model"] and ptr["best"] == ptr["last"]
    assert {ptr["best"], ptr["last"]}.isdisjoint({old["best"], old["last"]})
    assert load_run(run, "best").model is not None      # the new run's weights, its signature


def test_resume_of_what_is_not_a_run_is_one_line(tmp_path, capsys):
    empty, file = tmp_path / "empty", tmp_path / "file.txt"
    empty.mkdir()
    file.write_text("x", encoding="utf-8")
    for path, says in ((empty, "not a treelm run directory (no checkpoint.json)"),
                       (file, "not a directory"), (tmp_path / "none", "no such run directory")):
        assert main(["train", "--resume", str(path)]) == 2
        assert capsys.readouterr().err == f"treelm: error: {path}: {says}" + (
            "; nothing to resume\n" if path == empty else "\n")
