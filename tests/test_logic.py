"""Logical inference: relations checked against an independent brute force (Python ``eval`` over
truth tables), Bowman's bracketing and file format, the generator's splits, the pair classifier's
padding, equal parameter counts of the two configs, and a tiny run through train / eval."""

from __future__ import annotations

import itertools
import json
import os
import random
from pathlib import Path

import pytest
import torch
import yaml

from treelm.cli import main
from treelm.data.corpus import CorpusError
from treelm.data.logic import LogicData, load_split, read_pairs, write_pairs
from treelm.data.logic_formulas import (
    RELATIONS,
    VARIABLES,
    FormulaError,
    Pair,
    n_ops,
    parse,
    relation,
    to_text,
)
from treelm.data.logic_generator import distinct_pairs
from treelm.models import build_model
from treelm.models.pair import PairClassifier
from treelm.rundir.files import read_metrics
from treelm.tasks import read_run_config

ROOT = Path(__file__).resolve().parents[1]

# ----------------------------------------------------------------------------- brute force


def python_expr(tokens: list[str] | tuple[str, ...]) -> str:
    """Bowman's ``( L ( and R ) )`` as Python's ``( L and ( R ) )``: move each binary operator out
    of the bracket it opens. ``( not X )`` is Python already."""
    out: list[str] = []
    for t in tokens:
        if t in ("and", "or") and out and out[-1] == "(":
            out[-1:] = [t, "("]
        else:
            out.append(t)
    return " ".join(out)


def brute_relation(left: str, right: str) -> str:
    """The relation by enumeration: the sets of satisfying assignments as Python sets."""
    worlds = list(itertools.product([False, True], repeat=len(VARIABLES)))
    a_code, b_code = (compile(python_expr(s.split()), "<formula>", "eval") for s in (left, right))
    A = {w for w in worlds if eval(a_code, {}, dict(zip(VARIABLES, w, strict=True)))}
    B = {w for w in worlds if eval(b_code, {}, dict(zip(VARIABLES, w, strict=True)))}
    U = set(worlds)
    assert A and B and A != U and B != U, "a formula that is always true or false"
    if A == B:
        return "="
    if A < B:
        return "<"
    if A > B:
        return ">"
    if not A & B:
        return "^" if A | B == U else "|"
    return "v" if A | B == U else "#"


HAND = [
    ("=", "( a ( and b ) )", "( b ( and a ) )"),
    ("=", "( not ( a ( or b ) ) )", "( ( not a ) ( and ( not b ) ) )"),          # De Morgan
    ("<", "( a ( and b ) )", "a"),
    ("<", "( not ( a ( or b ) ) )", "( not a )"),
    (">", "a", "( a ( and b ) )"),
    (">", "( not ( c ( and ( not d ) ) ) )", "d"),                      # a line of Bowman's train3
    ("^", "a", "( not a )"),
    ("^", "( a ( and b ) )", "( ( not a ) ( or ( not b ) ) )"),
    ("|", "( a ( and b ) )", "( not a )"),
    ("|", "( not ( e ( or ( not c ) ) ) )", "( d ( and e ) )"),         # a line of Bowman's train3
    ("v", "( a ( or b ) )", "( not a )"),
    ("v", "( ( a ( and a ) ) ( or ( d ( or b ) ) ) )", "( not d )"),     # a line of Bowman's train3
    ("#", "a", "b"),
    ("#", "d", "( not ( ( f ( or e ) ) ( and c ) ) )"),                 # a line of Bowman's train3
]


def test_python_expr_rewrites_bowmans_brackets():
    assert python_expr("( ( a ( or b ) ) ( and ( not c ) ) )".split()) == \
        "( ( a or ( b ) ) and ( ( not c ) ) )"


@pytest.mark.parametrize("rel, left, right", HAND, ids=[f"{r}:{a}|{b}" for r, a, b in HAND])
def test_hand_cases_of_every_relation(rel, left, right):
    assert brute_relation(left, right) == rel            # the brute force itself
    assert relation(parse(left), parse(right)) == rel


def test_the_hand_cases_cover_every_relation():
    assert {r for r, _, _ in HAND} == set(RELATIONS)


def test_generated_relations_match_the_brute_force():
    pairs = [p for n in range(0, 9) for p in distinct_pairs(7, n, 40)]
    assert len(pairs) > 300 and {p.relation for p in pairs} == set(RELATIONS)
    for p in pairs:
        assert brute_relation(" ".join(p.left), " ".join(p.right)) == p.relation, p.line()


def test_always_true_or_false_formulas_have_no_relation():
    with pytest.raises(ValueError, match="always true or always false"):
        relation(parse("( a ( or ( not a ) ) )"), parse("b"))
    with pytest.raises(ValueError, match="always true or always false"):
        relation(parse("b"), parse("( a ( and ( not a ) ) )"))


# ----------------------------------------------------------------------------- formulas


def test_parse_and_print_round_trip():
    for p in distinct_pairs(3, 7, 50):
        for side in (p.left, p.right):
            text = " ".join(side)
            f = parse(text)
            assert to_text(f) == text
            assert n_ops(f) == sum(t in ("and", "or", "not") for t in side)
        assert p.ops == 7 == max(n_ops(parse(p.left)), n_ops(parse(p.right)))
    assert parse("( a ( or ( not b ) ) )") == ("or", "a", ("not", "b"))


@pytest.mark.parametrize("text, message", [
    ("( a ( and b )", "unbalanced brackets: 1 '(' not closed"),
    ("a ) (", "unbalanced brackets: ')' without '('"),
    ("( a ( xor b ) )", "unknown token 'xor'"),
    ("( a ( and g ) )", "unknown token 'g'"),
    ("( a and b )", "expected '(' at token 3, got 'and'"),
    ("( ( and b ) )", "expected a variable or '(' at token 3, got 'and'"),
    ("a b", "tokens after the end of the formula, from token 2"),
    ("", "empty formula"),
])
def test_malformed_formulas(text, message):
    with pytest.raises(FormulaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


# ----------------------------------------------------------------------------- files


def test_bowman_files_round_trip(tmp_path):
    pairs = [p for n in (1, 2, 3) for p in distinct_pairs(5, n, 30)]
    write_pairs(tmp_path / "pairs", pairs)
    assert read_pairs(tmp_path / "pairs") == pairs
    line = (tmp_path / "pairs").read_text().splitlines()[0]
    assert line.count("\t") == 2 and line.split("\t")[0] in RELATIONS


@pytest.mark.parametrize("line, message", [
    ("<\t( a ( and b )\ta", "f:2: first formula: unbalanced brackets"),
    ("<\t( a ( and b ) )\t( z )", "f:2: second formula: unknown token 'z'"),
    ("~\ta\tb", "f:2: unknown relation '~'"),
    ("#\ta", "f:2: expected 'relation<TAB>formula<TAB>formula', got 2"),
    ("<\ta\tb", "f:2: relation '<', but the formulas are in relation '#' (independence)"),
    ("#\t( a ( or ( not a ) ) )\tb", "f:2: the first formula is always true"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    f = tmp_path / "f"
    f.write_text("=\ta\ta\n" + line + "\n")
    with pytest.raises(CorpusError) as e:
        read_pairs(f)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_bowman_directory_and_every_tenth_pair_held_out(tmp_path):
    d = tmp_path / "propositionallogic"
    d.mkdir()
    for n in range(0, 5):
        write_pairs(d / f"train{n}", distinct_pairs(11, n, 20))
        write_pairs(d / f"test{n}", distinct_pairs(12, n, 5))
    spec = LogicData.parse({"source": "files", "train": str(d), "test": str(d),
                            "max_train_ops": 3, "max_test_ops": 4})
    train, valid = load_split(spec, "train"), load_split(spec, "valid")
    every = [p for n in range(0, 4) for p in distinct_pairs(11, n, 20)]   # train0..train3
    assert valid == every[9::10] and len(train) + len(valid) == len(every) == 80
    assert len(load_split(spec, "test")) == 25


# ----------------------------------------------------------------------------- generator


def spec(**kw) -> LogicData:
    base = {"seed": 4, "train_size": 60, "valid_size": 10, "test_size": 15, "max_train_ops": 3,
            "max_test_ops": 5}
    return LogicData.parse({**base, **kw})


def test_generated_splits_are_disjoint_and_sized():
    s = spec()
    splits = {name: load_split(s, name) for name in ("train", "valid", "test")}

    def key(p: Pair) -> tuple[tuple[str, ...], ...]:
        return tuple(sorted((p.left, p.right)))

    keys = {name: {key(p) for p in ps} for name, ps in splits.items()}
    for a, b in itertools.combinations(keys, 2):
        assert not keys[a] & keys[b], (a, b)
    for name, ps in splits.items():
        assert len(keys[name]) == len(ps)           # no pair twice, nor mirrored
    count = lambda ps, n: sum(p.ops == n for p in ps)         # noqa: E731
    assert [count(splits["test"], n) for n in range(1, 6)] == [15] * 5
    assert [count(splits["train"], n) for n in range(1, 4)] == [60] * 3
    assert [count(splits["valid"], n) for n in range(1, 4)] == [10] * 3
    assert max(p.ops for p in splits["train"] + splits["valid"]) == 3


def test_generation_is_deterministic_and_test_does_not_move_with_train_size():
    assert load_split(spec(), "train") == load_split(spec(), "train")
    assert load_split(spec(seed=5), "train") != load_split(spec(), "train")
    assert load_split(spec(train_size=200), "test") == load_split(spec(), "test")
    assert load_split(spec(train_size=200), "valid") == load_split(spec(), "valid")


def test_one_operator_runs_out_and_train_gets_the_rest():
    # 3,549 pairs have at most one operator, at least one of them one; the stream stops when
    # it finds no new one 2,000 times in a row
    s = spec(train_size=5000, valid_size=100, test_size=100, max_train_ops=1, max_test_ops=1)
    n = len(load_split(s, "train"))
    assert 3000 < n + 200 <= 3549
    with pytest.raises(Exception, match="only .* distinct pairs have 1 operator"):
        load_split(spec(test_size=4000, max_train_ops=1, max_test_ops=1), "test")


# ----------------------------------------------------------------------------- model


@pytest.mark.parametrize("cell", ["lstm", "onlstm"])
def test_padding_and_batch_mates_do_not_change_the_logits(cell):
    torch.manual_seed(0)
    opts = {"chunk_size": 4} if cell == "onlstm" else None
    m = PairClassifier(vocab_size=12, n_classes=7, pad_id=0, cell=cell, sizes=[6, 8],
                       cell_options=opts, dropout=0.3).eval()
    rng = random.Random(0)
    seqs = [[rng.randint(1, 11) for _ in range(rng.randint(1, 9))] for _ in range(8)]

    def pad(rows, extra=0):
        T = max(map(len, rows)) + extra
        return (torch.tensor([r + [0] * (T - len(r)) for r in rows]).t(),
                torch.tensor([len(r) for r in rows]))

    left, right = seqs[:4], seqs[4:]
    y = m(*pad(left), *pad(right))
    assert y.shape == (4, 7)
    assert torch.allclose(m(*pad(left, 5), *pad(right, 2)), y, atol=1e-6)
    for b in range(4):
        alone = m(*pad([left[b]]), *pad([right[b]]))
        assert torch.allclose(alone[0], y[b], atol=1e-5)


def test_the_encoding_is_the_state_after_the_last_symbol():
    torch.manual_seed(0)
    m = PairClassifier(vocab_size=12, n_classes=7, pad_id=0, sizes=[5, 7]).eval()
    tokens = torch.tensor([[3, 4, 5], [6, 0, 0]]).t()
    h = m.encode(tokens, torch.tensor([3, 1]))
    assert torch.allclose(h[0], m.features(tokens[:, :1]).out[-1, 0], atol=1e-6)
    assert torch.allclose(h[1], m.features(torch.tensor([[6]])).out[0, 0], atol=1e-6)


def test_configs_have_equal_parameter_counts(capsys):
    counts = {}
    for name in ("logic-onlstm", "logic-lstm"):
        cfg = yaml.safe_load((ROOT / "configs" / f"{name}.yaml").read_text())
        assert cfg["model"]["cell"] == name.split("-")[1]
        model = build_model(cfg["model"], vocab_size=12, n_classes=7, pad_id=0)
        counts[name] = sum(p.numel() for p in model.parameters())
    with capsys.disabled():
        print(f"\nparameters: {counts}")
    a, b = counts.values()
    assert abs(a - b) / a < 0.01
    assert counts == {"logic-onlstm": 385_815, "logic-lstm": 385_895}    # as the configs say


# ----------------------------------------------------------------------------- task and CLI


def tiny_task(**data):
    cfg = yaml.safe_load((ROOT / "configs/tiny-logic.yaml").read_text())
    cfg["data"].update(data)
    config = read_run_config(cfg)
    return config.task.create(config, torch.device("cpu"))


def test_batches_resume_from_their_position_and_shard_equally():
    task = tiny_task()
    it = task.batches()
    for _ in range(5):
        next(it)
    state = task.state_dict()
    rest = [b.data[4].tolist() for b in it]
    again = tiny_task()
    again.load_state_dict(state)
    assert [b.data[4].tolist() for b in again.batches()] == rest
    shards = [task.config.task.create(task.config, torch.device("cpu"), rank, 2)
              for rank in (0, 1)]
    orders = [[i for b in s.batch_order() for i in b] for s in shards]
    assert len(orders[0]) == len(orders[1]) and not set(orders[0]) & set(orders[1])


@pytest.fixture(scope="module")
def logic_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("logic") / "run"
    here = os.getcwd()
    os.chdir(ROOT)
    try:
        assert main(["train", "--config", "configs/tiny-logic.yaml", "--out", str(run),
                     "--quiet"]) == 0
    finally:
        os.chdir(here)
    return run


def test_tiny_run_learns_something(logic_run, capsys):
    valid = read_metrics(logic_run, "valid")
    assert len(valid) == 8 and all({"accuracy", "loss", "acc_ops1", "acc_ops3"} <= set(m)
                                   for m in valid)
    pairs = load_split(tiny_task().spec, "valid")
    majority = 100 * max(sum(p.relation == r for p in pairs) for r in RELATIONS) / len(pairs)
    assert max(m["accuracy"] for m in valid) > majority + 3
    assert min(m["loss"] for m in valid) < valid[0]["loss"] - 0.2
    assert main(["eval", str(logic_run), "--split", "test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["pairs"] == 300
    assert {f"acc_ops{n}" for n in range(1, 6)} | {"accuracy", "acc_long"} <= set(out)
    assert out["accuracy"] > majority


def _frozen_batch_order(keys: list[int], bs: int, seed: int, epoch: int, rank: int,
                        world: int) -> list[list[int]]:
    """The epoch plan of tasks/logic.py before the epoch iterator (main at ce215a8), frozen."""
    rng = random.Random(seed * 1_000_003 + epoch)
    idx = list(range(len(keys)))
    rng.shuffle(idx)
    idx = idx[: len(idx) // world * world][rank::world]
    batches: list[list[int]] = []
    for lo in range(0, len(idx), bs * 32):
        window = sorted(idx[lo:lo + bs * 32], key=lambda i: keys[i])
        batches += [window[j:j + bs] for j in range(0, len(window), bs)]
    rng.shuffle(batches)
    return batches


@pytest.mark.parametrize("world", [1, 2])
def test_the_epoch_iterator_keeps_the_batch_order_of_before(world):
    """Same seed, same batches in the same order as the task's own loop had (recorded from main
    before the port in tests/data/logic_batch_order.json, and a frozen copy of that loop)."""
    rec = json.loads((ROOT / "tests/data/logic_batch_order.json").read_text())
    cfg = yaml.safe_load((ROOT / rec["config"]).read_text())
    cfg["data"].update(rec["data"])
    cfg["train"].update(rec["train"])
    config = read_run_config(cfg)
    for rank in range(world):
        task = config.task.create(config, torch.device("cpu"), rank, world)
        keys = [max(len(r[0]), len(r[1])) for r in task.encoded("train")]
        for epoch, recorded in enumerate(rec["orders"][f"{rank}/{world}"]):
            ours = [b.data[4].tolist() for b in task.batches()]     # the relations, in order
            rows = task.encoded("train")
            assert task.batch_order() == recorded == _frozen_batch_order(
                keys, rec["train"]["batch_size"], cfg["seed"], epoch, rank, world)
            assert ours == [[rows[i][2] for i in b] for b in recorded]
            task.new_epoch()
