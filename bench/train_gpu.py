"""Training the forecasters on a GPU (issue 21), each part printed and written as JSON to --out:

- determinism: for every model, at the chosen size, on the chosen device: two runs with one seed give one
  parameter SHA-256, in this process and in another; another seed gives another; a run interrupted after
  a checkpoint and resumed gives the uninterrupted run's hash;
- throughput: samples/s of one training step (forward, backward, clipping, AdamW) on a batch resident on
  the device, with determinism on (every switch of models/determinism.py) and off (algorithms free, cuDNN
  autotuning on; TF32 still off, then also on), eager and captured as one CUDA graph; and samples/s of the
  Trainer itself (batches gathered on the CPU and copied over, as `foxhunt train` runs);
- cpu_vs_gpu: the same seed and data trained on both: what is identical and the largest differences;
- tft_anchor: foxhunt's TFT step against pytorch-forecasting's TemporalFusionTransformer at the same
  sizes, side by side in alternating rounds (foxhunt with determinism on; pytorch-forecasting as it comes).

The data: the synthetic feed (adapters/feeds/synthetic.py) for three instruments, through the batch
feature pipeline and the data set builder, as `foxhunt train` builds it from a journal.

    python bench/train_gpu.py all --device cuda --size production --out DIR      (on the H200)
    python bench/train_gpu.py all --device cpu --size tiny --steps 8 --window 16 --batch 32 --quotes 3000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import torch

from foxhunt import config
from foxhunt.adapters.feeds import open_feed
from foxhunt.core.features import Columns, FeatureSpec
from foxhunt.models.configs import ARCHITECTURES, Shape, TrainConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.forecaster import build, parameter_hash
from foxhunt.runtime.clock import EventClock
from foxhunt.training import dataset
from foxhunt.training.trainer import Trainer, pinball_loss

SPEC = FeatureSpec()


def data(quotes: int, cfg: TrainConfig) -> dataset.Dataset:
    instruments = config.Config().trading().build_instruments()
    market = {}
    for i, symbol in enumerate(("EURUSD", "GBPUSD", "USDJPY")):
        price = ",price=150.000" if symbol == "USDJPY" else ""
        market[symbol] = Columns.of(list(open_feed(f"synthetic:seed={11 + i},n={quotes},symbol={symbol}{price}",
                                                   instruments, EventClock())))
    source = dataset.Source(journal="synthetic", first_seq=1, last_seq=3 * quotes, events=3 * quotes)
    return dataset.build(market, [source], SPEC, cfg)


def train_config(args, steps: int | None = None) -> TrainConfig:
    return TrainConfig(window=args.window, batch_size=args.batch, max_steps=steps or args.steps,
                       eval_every=max(1, (steps or args.steps) // 3), patience=100, threads=args.threads)


def trained_hash(arch: str, seed: int, args, d: dataset.Dataset, checkpoint: Path | None = None,
                 resume: bool = False, stop_at: int = 0) -> str:
    cfg = train_config(args)
    make_deterministic(args.threads)
    trainer = Trainer(d, arch, cfg.model(arch, args.size), cfg, seed, torch.device(args.device), checkpoint)

    def interrupt(step, _last):
        if step == stop_at:
            raise KeyboardInterrupt

    return parameter_hash(trainer.run(interrupt if stop_at else None, resume=resume).model)


def determinism(args, d) -> dict:
    out = {}
    for arch in args.archs:
        started = time.perf_counter()
        try:
            first = trained_hash(arch, 1, args, d)
            again = trained_hash(arch, 1, args, d)
            other = trained_hash(arch, 2, args, d)
            checkpoint = Path(tempfile.mkdtemp()) / f"ckpt-{arch}.pt"
            checkpoint.unlink(missing_ok=True)
            stop = train_config(args).eval_every + 1
            try:
                trained_hash(arch, 1, args, d, checkpoint, stop_at=stop)
            except KeyboardInterrupt:
                pass
            resumed = trained_hash(arch, 1, args, d, checkpoint, resume=True)
            checkpoint.unlink(missing_ok=True)
            child = subprocess.run([sys.executable, __file__, "hash", "--arch", arch, *passthrough(args)],
                                   capture_output=True, text=True, check=False, timeout=900)
            two = child.stdout.strip().splitlines()[-1] if child.returncode == 0 else f"failed: {child.stderr[-400:]}"
            out[arch] = {"hash": first, "same_seed_same_process": again == first, "other_seed_differs": other != first,
                         "resumed_equals_uninterrupted": resumed == first, "another_process": two == first,
                         "seconds": round(time.perf_counter() - started, 1)}
        except Exception as e:  # noqa: BLE001 - reported per model, the others still run
            out[arch] = {"error": f"{type(e).__name__}: {e}"}
        print(f"determinism {arch}: {out[arch]}", flush=True)
    return out


def passthrough(args) -> list[str]:
    return ["--device", args.device, "--size", args.size, "--steps", str(args.steps), "--window", str(args.window),
            "--batch", str(args.batch), "--quotes", str(args.quotes), "--threads", str(args.threads)]


def set_mode(mode: str) -> None:
    if mode == "deterministic":
        make_deterministic(torch.get_num_threads())
        return
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic = False
    torch.backends.cudnn.benchmark = True
    tf32 = mode == "free+tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def step_rate(model, x, y, q, device, steps: int, graph: bool) -> float:
    """Samples per second of training steps on the resident batch (x, y)."""
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=1e-4, capturable=graph)

    def step():
        loss = pinball_loss(model(x), y, q)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            step()
        run = g.replay
    else:
        def run():
            opt.zero_grad(set_to_none=True)
            step()
    for _ in range(5):
        run()
    sync(device)
    started = time.perf_counter()
    for _ in range(steps):
        run()
    sync(device)
    return x.size(0) * steps / (time.perf_counter() - started)


def throughput(args, d) -> dict:
    device = torch.device(args.device)
    cfg = train_config(args)
    ends = d.splits.train[: args.batch]
    x = torch.from_numpy(d.windows(ends)).to(device)
    y = torch.from_numpy(d.labels[ends]).to(device)
    q = torch.tensor(cfg.quantiles, device=device)
    out = {}
    for arch in args.archs:
        out[arch] = {}
        modes = ["deterministic", "free", "free+tf32"]
        for mode in modes:
            for graph in ((False, True) if device.type == "cuda" else (False,)):
                label = f"{mode}{' graph' if graph else ''}"
                try:
                    set_mode(mode)
                    model = build(arch, cfg.model(arch, args.size), shape(d, cfg), 1).to(device).train()
                    rates = [step_rate(model, x, y, q, device, args.timed_steps, graph) for _ in range(args.rounds)]
                    out[arch][label] = round(statistics.median(rates), 1)
                except Exception as e:  # noqa: BLE001 - a capture that fails is reported, not fatal
                    out[arch][label] = f"{type(e).__name__}: {str(e)[:200]}"
        set_mode("deterministic")
        # timed from step 5 to step 5 + timed_steps; the evaluation at the last step comes after that
        trainer = Trainer(d, arch, cfg.model(arch, args.size), msgspec.structs.replace(cfg, eval_every=10**9,
                          max_steps=args.timed_steps + 6), 1, device)
        marks = {}

        def mark(step, _last, marks=marks):
            if step in (5, 5 + args.timed_steps):
                sync(device)
                marks[step] = time.perf_counter()
        trainer.run(mark)
        took = marks[5 + args.timed_steps] - marks[5]
        out[arch]["trainer (deterministic)"] = round(args.batch * args.timed_steps / took, 1)
        print(f"throughput {arch} (samples/s): {out[arch]}", flush=True)
    set_mode("deterministic")
    return out


def shape(d, cfg):
    return Shape(window=cfg.window, features=d.rows.shape[1], horizons=cfg.horizons, quantiles=cfg.quantiles)


def cpu_vs_gpu(args, d) -> dict:
    if args.device != "cuda":
        return {"skipped": "needs --device cuda"}
    cfg = msgspec.structs.replace(train_config(args, steps=args.compare_steps), eval_every=args.compare_steps)
    ends = d.splits.validation[:512]
    x = torch.from_numpy(d.windows(ends))
    out = {}
    for arch in args.archs:
        models = {}
        for dev in ("cpu", "cuda"):
            make_deterministic(args.threads)
            models[dev] = Trainer(d, arch, cfg.model(arch, args.size), cfg, 1, torch.device(dev)).run().model.eval()
        initial = build(arch, cfg.model(arch, args.size), shape(d, cfg), 1)
        params = {k: (models["cpu"].state_dict()[k], v) for k, v in models["cuda"].state_dict().items()}
        diffs = [float((a.float() - b.float()).abs().max()) for a, b in params.values() if a.numel()]
        with torch.no_grad():
            forecast = float((models["cpu"].predict(x) - models["cuda"].predict(x)).abs().max())
            scale = float(models["cpu"].predict(x).abs().max())
        out[arch] = {
            "initial_weights_identical": parameter_hash(initial) == parameter_hash(build(arch, cfg.model(arch, args.size),
                                                                                         shape(d, cfg), 1)),
            "trained_hash_cpu": parameter_hash(models["cpu"]), "trained_hash_cuda": parameter_hash(models["cuda"]),
            "tensors_bitwise_identical": sum(bool(torch.equal(a, b)) for a, b in params.values()),
            "tensors": len(params), "largest_parameter_difference": max(diffs),
            "largest_forecast_difference": forecast, "largest_forecast": scale, "steps": cfg.max_steps,
        }
        print(f"cpu_vs_gpu {arch}: {out[arch]}", flush=True)
    return out


def tft_anchor(args, d) -> dict:
    """foxhunt's TFT training step against pytorch-forecasting's, same hidden size, heads, LSTM layers,
    encoder length (the window), decoder length (the horizons), batch, dropout and quantiles."""
    import warnings

    warnings.filterwarnings("ignore")
    from pytorch_forecasting import TemporalFusionTransformer as PfTft
    from pytorch_forecasting.data.encoders import TorchNormalizer
    from pytorch_forecasting.metrics import QuantileLoss

    device = torch.device(args.device)
    cfg = train_config(args)
    tft_cfg = cfg.model("tft", args.size)
    ends = d.splits.train[: args.batch]
    x = torch.from_numpy(d.windows(ends)).to(device)
    y = torch.from_numpy(d.labels[ends]).to(device)
    q = torch.tensor(cfg.quantiles, device=device)
    b, length, features, horizons = x.size(0), x.size(1), x.size(2), len(cfg.horizons)
    reals = [f"f{i}" for i in range(features)] + ["relative_time_idx"]
    normalizer = TorchNormalizer(method="identity", center=False)
    normalizer.fit(torch.zeros(2))
    pf = PfTft(hidden_size=tft_cfg.hidden, lstm_layers=tft_cfg.lstm_layers, dropout=tft_cfg.dropout,
               attention_head_size=tft_cfg.heads, output_size=len(cfg.quantiles),
               loss=QuantileLoss(quantiles=list(cfg.quantiles)), max_encoder_length=length, x_reals=reals,
               time_varying_reals_encoder=reals, time_varying_reals_decoder=["relative_time_idx"],
               hidden_continuous_size=tft_cfg.hidden, output_transformer=normalizer).to(device).train()
    steps_time = torch.arange(-length, horizons, device=device, dtype=torch.float32).div(length)
    batch = {
        "encoder_cat": torch.zeros(b, length, 0, dtype=torch.long, device=device),
        "decoder_cat": torch.zeros(b, horizons, 0, dtype=torch.long, device=device),
        "encoder_cont": torch.cat([x, steps_time[:length].expand(b, length).unsqueeze(-1)], -1),
        "decoder_cont": torch.cat([torch.zeros(b, horizons, features, device=device),
                                   steps_time[length:].expand(b, horizons).unsqueeze(-1)], -1),
        "encoder_lengths": torch.full((b,), length, device=device), "decoder_lengths": torch.full((b,), horizons, device=device),
        "target_scale": torch.stack([torch.zeros(b, device=device), torch.ones(b, device=device)], -1),
    }
    pf_opt = torch.optim.Adam(pf.parameters(), lr=1e-4)

    def pf_rate() -> float:
        for i in range(args.timed_steps + 5):
            if i == 5:
                sync(device)
                started = time.perf_counter()
            pf_opt.zero_grad(set_to_none=True)
            loss = pf.loss.loss(pf(batch)["prediction"], y).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(pf.parameters(), 1.0)
            pf_opt.step()
        sync(device)
        return b * args.timed_steps / (time.perf_counter() - started)

    ours = build("tft", tft_cfg, shape(d, cfg), 1).to(device).train()
    rounds = {"foxhunt (deterministic)": [], "foxhunt (deterministic, graph)": [], "pytorch-forecasting": [],
              "pytorch-forecasting (deterministic)": []}
    for _ in range(args.rounds):
        set_mode("deterministic")
        rounds["foxhunt (deterministic)"].append(step_rate(ours, x, y, q, device, args.timed_steps, graph=False))
        if device.type == "cuda":
            rounds["foxhunt (deterministic, graph)"].append(step_rate(ours, x, y, q, device, args.timed_steps, graph=True))
        set_mode("free")  # determinism off, float32 as foxhunt's (no TF32)
        torch.backends.cudnn.benchmark = False  # torch's default
        rounds["pytorch-forecasting"].append(pf_rate())
        set_mode("deterministic")
        try:
            if "pytorch-forecasting (deterministic)" in rounds:
                rounds["pytorch-forecasting (deterministic)"].append(pf_rate())
        except RuntimeError as e:  # an op of theirs with no deterministic kernel
            rounds.pop("pytorch-forecasting (deterministic)", None)
            rounds["pytorch-forecasting (deterministic) refused"] = str(e)[:200]
    set_mode("deterministic")
    out = {k: round(statistics.median(v), 1) if isinstance(v, list) else v for k, v in rounds.items() if v}
    out["parameters"] = {"foxhunt": sum(p.numel() for p in ours.parameters()),
                         "pytorch-forecasting": sum(p.numel() for p in pf.parameters())}
    out["ratio"] = round(out["foxhunt (deterministic)"] / out["pytorch-forecasting"], 2)
    out["sizes"] = {"hidden": tft_cfg.hidden, "heads": tft_cfg.heads, "lstm_layers": tft_cfg.lstm_layers,
                    "encoder": length, "decoder": horizons, "batch": b, "dropout": tft_cfg.dropout}
    print(f"tft_anchor (samples/s): {out}", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("part", choices=["all", "determinism", "throughput", "cpu_vs_gpu", "tft_anchor", "hash"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="production")
    p.add_argument("--archs", default=",".join(ARCHITECTURES))
    p.add_argument("--arch")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--compare-steps", type=int, default=10)
    p.add_argument("--timed-steps", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--quotes", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    args.archs = args.archs.split(",")
    make_deterministic(args.threads)  # before any CUDA work
    d = data(args.quotes, train_config(args))
    if args.part == "hash":
        print(trained_hash(args.arch, 1, args, d))
        return
    Path(args.out).mkdir(parents=True, exist_ok=True)
    report = {"environment": fingerprint(torch.device(args.device)), "size": args.size, "samples": d.describe(),
              "window": args.window, "batch": args.batch}
    parts = ["determinism", "throughput", "cpu_vs_gpu", "tft_anchor"] if args.part == "all" else [args.part]
    print(json.dumps(report), flush=True)
    for part in parts:
        started = time.perf_counter()
        report[part] = globals()[part](args, d)
        print(f"{part} took {time.perf_counter() - started:.0f} s", flush=True)
        (Path(args.out) / f"train_gpu-{args.part}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
