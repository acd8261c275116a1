import pytest
import torch

from treelm.data.batching import BPTTSchedule, batchify, check_columns, get_batch
from treelm.data.corpus import CorpusError, load_corpus
from treelm.errors import ConfigError, TreelmError
from treelm.text import EOS, UNK, UnknownSymbolError, Vocab


def test_vocab_roundtrip_and_unk_policy(tmp_path):
    v = Vocab.build([["b", "a", "b", "c", "b", "a"]])
    assert v.itos[:2] == [EOS, UNK] and v.itos[2:] == ["b", "a", "c"]
    assert v.encode(["a", "zzz"]) == [v.stoi["a"], v.unk]
    with pytest.raises(UnknownSymbolError, match="zzz"):
        v.encode(["zzz"], unk="error")
    with pytest.raises(ValueError, match="unknown token policy"):
        v.encode(["a"], unk="drop")
    p = tmp_path / "v.json"
    p.write_text(v.to_json())
    assert Vocab.load(p).itos == v.itos


def test_ptb_word_and_char_defaults():
    c = load_corpus({"source": "ptb"})
    assert len(c.vocab) == 10000                     # Mikolov's PTB
    assert c.train.numel() == 929589 and c.valid.numel() == 73760 and c.test.numel() == 82430
    ch = load_corpus({"source": "ptb-char"})
    assert ch.tokenizer.level == "char" and 45 <= len(ch.vocab) <= 60
    assert ch.tokenizer.decode(ch.vocab.decode(ch.valid[:20].tolist())).startswith(
        "consumers may want")


def test_user_files_and_split(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("\n".join(f"w{i % 7} w{i % 3} end" for i in range(100)))
    c = load_corpus({"source": "files", "file": str(f), "split": [0.8, 0.1, 0.1]})
    assert c.train.numel() == 80 * 4 and c.valid.numel() == 10 * 4
    with pytest.raises(ConfigError, match="three positive fractions"):
        load_corpus({"source": "files", "file": str(f), "split": [0.5, 0.5]})


@pytest.mark.parametrize("content,msg", [(None, "no such file"), (b"", "empty corpus"),
                                         (b"  \n\n", "empty corpus"),
                                         (b"ok\n\xff\xfe bad\n", "not UTF-8")])
def test_bad_files_one_line_errors(tmp_path, content, msg):
    f = tmp_path / "bad.txt"
    if content is not None:
        f.write_bytes(content)
    with pytest.raises(CorpusError, match=msg) as e:
        load_corpus({"source": "files", "train": str(f), "valid": str(f), "test": str(f)})
    assert str(f) in str(e.value) and "\n" not in str(e.value)


def test_batchify_and_bptt():
    data = torch.arange(103)
    b = batchify(data, 4)
    assert b.shape == (25, 4) and b[:, 1].tolist() == list(range(25, 50))
    x, y = get_batch(b, 0, 10)
    assert torch.equal(y, b[1:11]) and torch.equal(x, b[:10])
    s1, s2 = BPTTSchedule(70, seed=3), BPTTSchedule(70, seed=3)
    lens = [s1.next_len() for _ in range(200)]
    assert lens == [s2.next_len() for _ in range(200)]
    assert min(lens) >= 5 and max(lens) <= 90 and 60 < sum(lens) / 200 < 72


def test_batch_size_too_large_is_one_line_naming_the_key():
    """2 rows per column for evaluation (an input and its next token), 3 for training."""
    data = torch.arange(103)
    assert batchify(data, 51).shape == (2, 51)
    with pytest.raises(TreelmError) as e:
        batchify(data, 52, "train.eval_batch_size", "the valid split")
    assert str(e.value) == ("train.eval_batch_size=52 is too large for the valid split (103 "
                            "tokens, at least 2 per column): the largest that fits is 51")
    check_columns(103, 34, rows=3)
    with pytest.raises(TreelmError, match="batch_size=35 .* the largest that fits is 34"):
        check_columns(103, 35, rows=3)
    with pytest.raises(TreelmError, match="no batch size fits"):
        batchify(torch.arange(1), 1)
