"""The inverse direction: ``train --direction inverse`` learns p(source | target) on the same
unique pairs, and ``rescore`` appends one column per network (``-m`` more than once), each in its
network's direction: an inverse network's column equals the plain computation
(``sequence_log_probs`` of target -> source) within test_scoring's tolerance (1e-5 relative, log
space); two networks give two columns, in the order given, every other byte kept; ``inspect``
names them; ``moses-ini`` and ``moses-step`` give each its num-features and starting weight."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from phrase_rescorer.cli import cli
from phrase_rescorer.data.batching import sequences_batch
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.model.checkpoint import load_checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import sequence_log_probs
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.moses.words import split_words
from phrase_rescorer.rescoring.engine import rescore_table
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import (  # noqa: F401  (one_thread is a fixture)
    appended_columns,
    log_column,
    one_thread,
    read_lines,
    tiny_arch_checkpoint,
    tiny_checkpoint,
)
from tests.helpers.synthetic import mapping_table
from tests.helpers.train_options import TINY_NETWORK

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 lines of the bundled sample (sorted by source; targets recur across sources)."""
    path = tmp_path_factory.mktemp("t") / "pt.gz"
    path.write_bytes(gzip.compress(b"".join(read_lines(SAMPLE)[:300])))
    return path


def inverse_of(forward: Path, path: Path) -> Path:
    """The same weights as a network reading the table's targets: vocabularies swapped (both
    shortlists have the same size), ``direction`` recorded as train --direction inverse does."""
    ckpt = load_checkpoint(str(forward))
    assert len(ckpt.src_vocab) == len(ckpt.tgt_vocab)
    save_checkpoint(
        str(path), ckpt.build_model(), ckpt.tgt_vocab, ckpt.src_vocab, info={**ckpt.info, "direction": "inverse"}
    )
    return path


def plain_inverse(model: Path, table: Path) -> np.ndarray:
    """log p(source | target) of every line, pair by pair: the network reads the target."""
    ckpt = load_checkpoint(str(model))
    net = ckpt.build_model()
    out = []
    with torch.inference_mode(), InputTable(str(table)) as entries:
        for entry in entries:
            b = sequences_batch(
                [ckpt.src_vocab.encode(split_words(entry.target))], [ckpt.tgt_vocab.encode(split_words(entry.source))]
            )
            out.append(float(sequence_log_probs(net, b.src, b.src_len, b.tgt, b.tgt_len)[0]))
    return np.array(out)


def test_swapped_pairs_are_the_same_pairs_read_the_other_way() -> None:
    pairs = load_pairs(str(SAMPLE))
    inverse = pairs.swapped()
    assert len(inverse) == len(pairs) and np.array_equal(inverse.hashes, pairs.hashes)  # same held-out pairs
    for i in (0, 17, len(pairs) - 1):
        source, target = pairs.pair(i)
        assert inverse.pair(i) == (target, source)


@pytest.mark.parametrize("arch", ["cho2014", "rnnsearch"])
@pytest.mark.parametrize("scorer", ["prefix", "batched"])
def test_an_inverse_column_equals_the_plain_computation(arch: str, scorer: str, table: Path, tmp_path: Path) -> None:
    forward = (
        tiny_checkpoint(tmp_path / "f.pt") if arch == "cho2014" else tiny_arch_checkpoint(tmp_path / "f.pt", arch=arch)
    )
    model = inverse_of(forward, tmp_path / "inverse.pt")
    out = tmp_path / "out.gz"
    summary = rescore_table(str(table), str(out), str(model), device="cpu", window=40, window_cap=80, scorer=scorer)
    got = log_column(appended_columns(table, out))
    want = plain_inverse(model, table)
    assert np.all(np.abs(got - want) <= 1e-5 * np.maximum(1.0, np.abs(want))) and np.ptp(want) > 1.0
    assert "|direction:inverse|" in summary.signature


def test_two_networks_give_two_columns_in_order(model: Path, table: Path, tmp_path: Path) -> None:
    inverse = inverse_of(model, tmp_path / "inverse.pt")
    runner = CliRunner()
    outs = {}
    for name, models in (("f", [model]), ("i", [inverse]), ("both", [model, inverse])):
        outs[name] = tmp_path / f"{name}.gz"
        args = [a for m in models for a in ("-m", str(m))]
        r = runner.invoke(cli, ["rescore", str(table), str(outs[name]), *args, "--unk-feature", "--window", "50"])
        assert r.exit_code == 0, r.output
    both = appended_columns(table, outs["both"], columns=3)  # every other byte kept
    alone = {k: appended_columns(table, outs[k], columns=2) for k in ("f", "i")}
    assert [v[0] for v in both] == [v[0] for v in alone["f"]]  # first -m, first column: the same bytes
    assert [v[1] for v in both] == [v[0] for v in alone["i"]]
    assert [v[2] for v in both] == [v[1] for v in alone["f"]]  # WP: after them all, the first network's
    assert [v[0] for v in both] != [v[1] for v in both]
    fingerprints = "+".join(load_checkpoint(str(m)).fingerprint() for m in (model, inverse))
    assert f"signature: model:{fingerprints}|direction:forward+inverse|" in r.stderr

    r = runner.invoke(cli, ["-q", "inspect", str(outs["both"]), "-m", str(model), "-m", str(inverse), "--unk-feature"])
    assert r.exit_code == 0, r.output
    assert "  score 4          lex(target|source) (Moses' lex(e|f), direct)\n" in r.output
    assert "  score 5          RNN p(target|source) (Moses' p(e|f), direct)\n" in r.output
    assert "  score 6          RNN p(source|target) (Moses' p(f|e), inverse)\n" in r.output
    assert "  score 7          RNN out-of-shortlist words n, as exp(n)" in r.output

    ini_in = tmp_path / "moses.ini"
    ini_in.write_text(
        "[feature]\nWordPenalty\nPhraseDictionaryMemory name=TranslationModel0 num-features=4 "
        f"path={table} input-factor=0 output-factor=0\n[weight]\nWordPenalty0= -1\n"
        "TranslationModel0= 0.1 0.2 0.3 0.4\n"
    )
    plain = tmp_path / "two.gz"  # without WP: 4 + 2 scores
    assert (
        runner.invoke(cli, ["-q", "rescore", str(table), str(plain), "-m", str(model), "-m", str(inverse)]).exit_code
        == 0
    )
    r = runner.invoke(cli, ["moses-ini", str(ini_in), str(tmp_path / "out.ini"), "--table", str(plain)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "out.ini").read_text()
    assert f"num-features=6 path={plain} " in text and "TranslationModel0= 0.1 0.2 0.3 0.4 0.02 0.02\n" in text


def test_moses_step_takes_several_networks(model: Path, table: Path, tmp_path: Path) -> None:
    inverse = inverse_of(model, tmp_path / "inverse.pt")
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "phrase-table.gz").write_bytes(table.read_bytes())
    (model_dir / "moses.ini").write_text(
        "[feature]\nPhraseDictionaryMemory name=TranslationModel0 num-features=4 "
        f"path={model_dir}/phrase-table.gz input-factor=0 output-factor=0\n[weight]\n"
        "TranslationModel0= 0.2 0.2 0.2 0.2\n"
    )
    r = CliRunner().invoke(cli, ["moses-step", str(model_dir), "-m", str(model), "-m", str(inverse)])
    assert r.exit_code == 0, r.output
    appended_columns(table, model_dir / "phrase-table.rnn.gz", columns=2)
    ini = (model_dir / "moses.rnn.ini").read_text()
    assert "num-features=6 " in ini and "TranslationModel0= 0.2 0.2 0.2 0.2 0.02 0.02\n" in ini


TINY = [
    *TINY_NETWORK,
    "--batch-size",
    "16",
    "--valid-fraction",
    "0.1",
    "--seed",
    "3",
    "--valid-every",
    "2",
    "--patience",
    "0",
    "--source-lang",
    "en",
    "--target-lang",
    "fr",
]


def test_train_direction_inverse_records_it_and_reads_the_targets(tmp_path: Path) -> None:
    data = mapping_table(tmp_path / "pt.gz", 300)
    runner = CliRunner()
    for direction in ("forward", "inverse"):
        r = runner.invoke(
            cli,
            [
                "train",
                str(data),
                str(tmp_path / f"{direction}.pt"),
                *TINY,
                "--max-steps",
                "2",
                "--direction",
                direction,
            ],
        )
        assert r.exit_code == 0, r.output
    forward, inverse = (load_checkpoint(str(tmp_path / f"{d}.pt")) for d in ("forward", "inverse"))
    assert (forward.direction, inverse.direction) == ("forward", "inverse")
    assert inverse.info["trained_on"] == "phrase pairs"
    assert (inverse.source_lang, inverse.target_lang) == ("fr", "en")  # the languages its network reads, writes
    assert inverse.src_vocab.tokens == forward.tgt_vocab.tokens  # the same vocabulary logic, sides swapped
    assert inverse.tgt_vocab.tokens == forward.src_vocab.tokens
    assert inverse.info["heldout_pairs"] == forward.info["heldout_pairs"]  # the same held-out pairs
    assert "p(source|target)" in r.stderr
    r = runner.invoke(
        cli,
        [
            "train",
            str(data),
            str(tmp_path / "forward.pt"),
            *TINY,
            "--max-steps",
            "4",
            "--direction",
            "inverse",
            "--resume",
        ],
    )
    assert r.exit_code != 0 and "direction was forward, now inverse" in r.output


def test_the_analysis_commands_say_the_direction_and_read_the_table_by_target(model: Path, tmp_path: Path) -> None:
    inverse = inverse_of(model, tmp_path / "inverse.pt")
    runner = CliRunner()
    for path, direction in ((model, "forward"), (inverse, "inverse")):
        r = runner.invoke(cli, ["suggest", "-m", str(path), "--raw", "--beam-size", "2", "--samples", "0", "la maison"])
        assert r.exit_code == 0, r.output
        assert f"direction: {direction}, p(" in r.stderr
    # "de" is the target of 14 lines of the sample: an inverse network's group of 14 sources
    r = runner.invoke(
        cli,
        [
            "compare",
            "-m",
            str(inverse),
            "-t",
            str(SAMPLE),
            "--raw",
            "--source",
            "de",
            "--format",
            "json",
            "--scatter-pairs",
            "0",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "direction: inverse, p(source|target)" in r.stderr
    assert '"table_column": 1' in r.stdout and '"source": "de"' in r.stdout and '"targets": 14' in r.stdout
    r = runner.invoke(
        cli,
        ["embed", "-m", str(inverse), "-t", str(SAMPLE), "--num-phrases", "5", "--raw", "-o", str(tmp_path / "emb")],
    )
    assert r.exit_code == 0, r.output
    assert "direction: inverse" in r.stderr


def test_the_experiment_system_of_both_directions(tmp_path: Path) -> None:
    from phrase_rescorer.experiment.settings import Models, Settings, target_lang
    from phrase_rescorer.experiment.systems import RNN_BOTH, check_coverage, prepare_system, systems_for
    from phrase_rescorer.model.kinds import open_model
    from tests.helpers.paths import REPO

    tiny = REPO / "tests" / "data" / "tiny-moses"
    table = tiny / "phrase-table.gz"
    ini = tmp_path / "moses.ini"
    ini.write_text((tiny / "moses.ini").read_text().replace("@MODEL_DIR@", str(tiny)))
    models = {}
    for direction in ("forward", "inverse"):
        models[direction] = tmp_path / f"{direction}.pt"
        r = CliRunner().invoke(
            cli,
            [
                "train",
                str(table),
                str(models[direction]),
                *TINY,
                "--vocab-size",
                "400",
                "--max-steps",
                "1",
                "--direction",
                direction,
            ],
        )
        assert r.exit_code == 0, r.output
    assert [s.key for s in systems_for(True, True, inverse=True)] == ["baseline", "rnn", "rnn-wp", "rnn-both"]
    src, tgt = check_coverage(str(table), str(models["inverse"]), 0.5)  # its shortlists, read the right way
    assert (src, tgt) == check_coverage(str(table), str(models["forward"]), 0.5)
    settings = Settings(
        ini=str(ini),
        dev=(str(tiny / "dev.en"), str(tiny / "dev.fr")),
        test=(str(tiny / "test.en"), str(tiny / "test.fr")),
        out_dir=str(tmp_path / "out"),
        model=str(models["inverse"]),
    )
    # the table's target language, whichever the network reads
    assert target_lang(settings, Models(model=open_model(str(models["inverse"])))) == "fr"
    start = prepare_system(
        RNN_BOTH,
        str(ini),
        str(table),
        str(models["forward"]),
        str(tmp_path / "out"),
        start_weights="ini",
        inverse_model=str(models["inverse"]),
    )
    rescored = tmp_path / "out" / "tables" / "phrase-table.rnn-both.gz"
    both = appended_columns(table, rescored, columns=2)
    alone = tmp_path / "inverse.gz"
    rescore_table(str(table), str(alone), str(models["inverse"]), device="cpu")
    assert [v[1] for v in both] == [v[0] for v in appended_columns(table, alone)]
    text = Path(start).read_text()
    assert "num-features=6 " in text and "TranslationModel0= 0.2 0.2 0.2 0.2 0.02 0.02" in text
