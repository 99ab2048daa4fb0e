"""Dropout (``--dropout``, ``--embed-dropout``): stored with the architecture's options, active in
training mode only. Every way a network scores (each scorer, the n-best feature, the beam search,
the table rescoring, validation) runs it in eval mode: a network with dropout 0.5 scores the same
on every call, and exactly as the same weights without dropout. A training step runs it in
training mode, where the loss of one batch changes from call to call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from phrase_rescorer.analysis.translate import translate
from phrase_rescorer.data.batching import collate
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.model.arch_options import ArchConfig
from phrase_rescorer.model.architectures import arch_config
from phrase_rescorer.model.checkpoint import load_checkpoint
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.moses.nbest import parse_nbest_line
from phrase_rescorer.parallel.distributed import Group
from phrase_rescorer.rescoring.engine import rescore_table
from phrase_rescorer.rescoring.scorers import make_scorer
from phrase_rescorer.scoring.features import load_feature
from phrase_rescorer.training.evaluate import evaluate
from phrase_rescorer.training.loop import Loop
from phrase_rescorer.training.phrase_task import PhraseTask
from phrase_rescorer.training.run_settings import TrainConfig, prepare_data
from phrase_rescorer.training.task_interface import LoopConfig
from tests.helpers.cli_run import run_cli
from tests.helpers.paths import SAMPLE
from tests.helpers.rescore_data import appended_columns, read_lines, sample_window, tiny_arch_checkpoint
from tests.helpers.synthetic import mapping_table

pytestmark = pytest.mark.usefixtures("one_thread")

#: Architectures with every place dropout acts: rnnsearch (bidirectional bottom layer, attention
#: from the top), a 3-layer gnmt (residual connections, attention from the bottom layer), a
#: 2-layer transformer (embeddings with their positions, every sub-layer's output).
VARIANTS = {
    "rnnsearch": dict(arch="rnnsearch"),
    "gnmt": dict(arch="gnmt", layers=3),
    "transformer": dict(arch="transformer", layers=2),
}
SOURCES = ["a man in a blue shirt .", "two dogs play", "the house is small"]
HYPS = [(0, "un homme ."), (0, "un homme en chemise"), (1, "deux chiens"), (2, "la maison est petite")]


@pytest.fixture(scope="module", params=list(VARIANTS))
def models(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same random weights saved twice: with dropout 0.5 (embeddings 0.3) and without."""
    d = tmp_path_factory.mktemp("m")
    options = VARIANTS[request.param]
    dropped = tiny_arch_checkpoint(d / "dropout.pt", seed=3, dropout=0.5, embed_dropout=0.3, **options)  # type: ignore[arg-type]
    plain = tiny_arch_checkpoint(d / "plain.pt", seed=3, **options)  # type: ignore[arg-type]
    return dropped, plain


def test_the_rates_are_stored_and_old_files_read_as_no_dropout(models: tuple[Path, Path]) -> None:
    dropped, plain = (load_checkpoint(str(p)) for p in models)
    assert dropped.arch is not None and plain.arch is not None
    assert (dropped.arch.dropout, dropped.arch.embedding_dropout) == (0.5, 0.3)
    assert (plain.arch.dropout, plain.arch.embedding_dropout) == (0.0, 0.0)
    # A file without dropout stores no rate: written (and fingerprinted) exactly as before.
    assert "dropout" not in plain.arch.to_dict() and "embed_dropout" not in plain.arch.to_dict()
    assert ArchConfig.from_dict(plain.arch.to_dict()).dropout == 0.0
    assert dropped.arch.to_dict()["dropout"] == 0.5
    assert all(torch.equal(dropped.state_dict[k], v) for k, v in plain.state_dict.items())
    assert dropped.fingerprint() != plain.fingerprint()  # another network's settings
    assert dropped.build_model().training is False  # a loaded network is in eval mode
    with pytest.raises(ValueError, match="dropout must be at least 0 and below 1"):
        arch_config("rnnsearch", dropout=1.0)
    with pytest.raises(ValueError, match="cho2014 is the paper's network and takes no architecture option"):
        arch_config("cho2014", dropout=0.2)


def test_dropout_acts_in_training_mode_only(models: tuple[Path, Path]) -> None:
    """The check that makes the others mean something: in training mode the network with
    dropout gives other logits on every call; in eval mode it gives the plain network's."""
    dropped, plain = (load_checkpoint(str(p)).build_model() for p in models)
    src = torch.tensor([[5, 9, 12, 2], [7, 2, 0, 0]])
    src_len = torch.tensor([4, 2])
    tgt = torch.tensor([[4, 8, 2], [6, 2, 0]])
    with torch.no_grad():
        want = plain(src, src_len, tgt)
        assert torch.equal(dropped(src, src_len, tgt), want)
        dropped.train()
        first, second = dropped(src, src_len, tgt), dropped(src, src_len, tgt)
    assert not torch.allclose(first, second) and not torch.allclose(first, want)


@pytest.mark.parametrize("kind", ["prefix", "batched", "reference"])
def test_every_scorer_scores_in_eval_mode(models: tuple[Path, Path], kind: str) -> None:
    sources, targets, index = sample_window(120)
    dropped, plain = (load_checkpoint(str(p)).build_model() for p in models)
    dropped.train()  # handed over in training mode: the scorer scores in eval mode all the same
    scorer = make_scorer(kind, dropped, "cpu")
    first = scorer.score(sources, targets, index)
    second = scorer.score(sources, targets, index)
    want = make_scorer(kind, plain, "cpu").score(sources, targets, index)
    assert np.array_equal(first, second)
    np.testing.assert_allclose(first, want, rtol=0, atol=1e-5)  # batches of another composition
    assert np.ptp(want) > 1.0


def test_the_nbest_feature_and_translate_score_in_eval_mode(models: tuple[Path, Path]) -> None:
    lines = [
        parse_nbest_line(f"{s} ||| {h} ||| LM0= -1 ||| -1".encode(), b"\n", i + 1, "n") for i, (s, h) in enumerate(HYPS)
    ]
    features = [load_feature(str(p), "NMT0", SOURCES) for p in (*models, models[0])]
    (first, _), (plain, _), (second, _) = (f.score(lines) for f in features)
    assert np.array_equal(first, second) and np.array_equal(first, plain)

    outputs = [
        list(translate(load_checkpoint(str(p)), SOURCES, beam_size=3, max_length=8)) for p in (*models, models[0])
    ]
    assert outputs[0] == outputs[1] == outputs[2]


def test_rescoring_a_table_is_the_same_with_dropout(models: tuple[Path, Path], tmp_path: Path) -> None:
    table = tmp_path / "pt"
    table.write_bytes(b"".join(read_lines(SAMPLE)[:80]))
    got = []
    for n, model in enumerate((*models, models[0])):
        out = tmp_path / f"out{n}"
        rescore_table(str(table), str(out), str(model), device="cpu", window=30)
        got.append(appended_columns(table, out))
    assert got[0] == got[1] == got[2]


def _trainer(table: Path, out: Path, arch: ArchConfig) -> Loop:
    cfg = TrainConfig(batch_size=16, valid_fraction=0.1, optimizer="adam", init_std=0.3, loop=LoopConfig(lr=1e-3))
    data = prepare_data(load_pairs(str(table)), 40, cfg)
    config = ModelConfig(len(data.src_vocab), len(data.tgt_vocab), 16, 16, 8, 8)
    device = torch.device("cpu")
    return Loop(PhraseTask(data, config, cfg, device, arch=arch), cfg.loop, str(out), device, Group())


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return mapping_table(tmp_path_factory.mktemp("table") / "pt.gz", 200)


def test_a_training_step_runs_in_training_mode(table: Path, tmp_path: Path) -> None:
    """The loss of one batch changes from call to call with dropout, not without; a step sets
    training mode whatever mode the network was left in; validation is in eval mode (the same
    held-out figures on every call, those of the same weights without dropout)."""
    dropped = _trainer(table, tmp_path / "d.pt", arch_config("rnnsearch", dropout=0.5))
    plain = _trainer(table, tmp_path / "p.pt", arch_config("rnnsearch"))
    d = dropped.task.data
    batch = collate(d.encoded, d.train_idx[:16])
    for trainer, varies in ((dropped, True), (plain, False)):
        trainer.task.network.train()
        with torch.no_grad():
            losses = [
                float(-trainer.task.net(batch.src, batch.src_len, batch.tgt, batch.tgt_len).sum()) for _ in range(2)
            ]
        assert (losses[0] != losses[1]) == varies, losses
    held = [evaluate(t.task.network, d.encoded, d.valid_idx, t.device) for t in (dropped, dropped, plain)]
    assert held[0] == held[1] == held[2] and dropped.task.network.training  # validation restores the mode

    dropped.task.network.eval()
    dropped.step(d.train_idx[:16])
    assert dropped.task.network.training


def test_train_nmt_stores_the_rates_and_cho2014_refuses_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.nmt import SIZES, TINY_MOSES

    corpus = [str(TINY_MOSES / "dev.en"), str(TINY_MOSES / "dev.fr")]
    out = tmp_path / "nmt.pt"
    code, err = run_cli(
        ["-q", "train-nmt", *corpus, str(out), *SIZES, "--max-steps", "3", "--dropout", "0.2", "--threads", "1"],
        monkeypatch,
        capsys,
    )
    assert code == 0, err
    arch = load_checkpoint(str(out)).arch
    assert arch is not None and (arch.dropout, arch.embedding_dropout) == (0.2, 0.2)
    code, err = run_cli(
        ["-q", "train-nmt", *corpus, str(tmp_path / "c.pt"), "--arch", "cho2014", "--dropout", "0.2"],
        monkeypatch,
        capsys,
    )
    assert code == 2 and "takes no architecture option (dropout)" in err
