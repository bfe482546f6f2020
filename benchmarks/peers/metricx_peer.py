"""google-research/metricx's side of the MetricX parity, in float64; runs ONLY in ``.venv-metricx`` (its code
on PYTHONPATH, transformers 4.30.2 as its requirements pin).

    .venv-metricx/bin/python benchmarks/peers/metricx_peer.py VERSION MODEL TOKENIZER INPUT.jsonl MAX_LENGTH [--qe]

Its own ``predict.get_dataset`` makes the inputs (template, truncation, end of sequence removed); its own
``MT5ForRegression`` scores them in float64, one row at a time. Prints ``{"scores": [...]}``.
"""

import importlib
import json
import sys

import torch
import transformers


def main() -> None:
    version, model_path, tokenizer_path, data, max_length = sys.argv[1:6]
    qe = "--qe" in sys.argv[6:]
    models = importlib.import_module(f"metricx{version}.models")
    predict = importlib.import_module(f"metricx{version}.predict")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tokenizer_path)
    model = models.MT5ForRegression.from_pretrained(model_path).double().eval()
    ds = predict.get_dataset(data, tokenizer, int(max_length), torch.device("cpu"), qe)["test"]
    scores = []
    with torch.no_grad():
        for example in ds:
            out = model(input_ids=example["input_ids"][None], attention_mask=example["attention_mask"][None])
            scores.append(float(out.predictions[0]))
    print(json.dumps({"scores": scores}))


if __name__ == "__main__":
    main()
