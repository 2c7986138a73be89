"""The zoo's VSE training step against VSE++'s own, as JSON.

    python -m tools.bench_vsepp ../vsepp --model gru --preset paper --rounds 3
    python -m tools.bench_vsepp ../vsepp --model gru --preset paper --record results/bench_vsepp.json

Alternates `--rounds` rounds of the zoo's training step with VSE++'s own
PyTorch `VSE.train_emb` (model.py of a clone of github.com/fartashf/vsepp;
needs `pip install torch`) on the same batches, VSE++ in a process of its
own (a `tools.worker.Worker`: if it dies, say of an import error in the
clone, the benchmark ends with its reason), and reports the pairs/s of each. The model must be one of the `gru`
family (a `models.vse_config.VSEConfig`: `gru`, the RCNs, the Vilalta et al.
pipelines); VSE++ is built with its options. The report names the
instruction set each side's kernels ran on (`zoo_isa`, capped by
ONEDNN_MAX_CPU_ISA; `vsepp_isa`, capped by MKL_ENABLE_INSTRUCTIONS too):
the AVX2 paths of an AVX-512 CPU are timed with

    ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 python -m tools.bench_vsepp ../vsepp --preset paper

`--record FILE` also writes
the report to FILE, with the command, date, machine and versions
(`common.records`).
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from common import machine, records
from common.errors import ArgumentParser, count, run_command
from tools.timing import (
    add_experiment_arguments,
    significant,
    throughput,
    time_steps,
    training_batches,
    training_flops,
    untrained_model,
    zoo_step,
)
from tools.worker import Worker


def parse_args(argv):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("vsepp", metavar="VSEPP_CLONE", help="a clone of github.com/fartashf/vsepp")
    parser.add_argument("--model", default="gru", help="a registered model with a VSEConfig (default gru)")
    add_experiment_arguments(parser)
    parser.add_argument("--rounds", type=count, default=3, help="alternating rounds")
    records.add_record_option(parser)
    args = parser.parse_args(argv)
    args.command = records.command_line("tools.bench_vsepp", argv)
    return args


def main(argv=None):
    return run_command(_run, parse_args(argv))


def _run(args):
    recording = records.Recording(args.record, args.command)
    report = compare_with_vsepp(args.model, args)
    print(json.dumps(report, indent=2))
    recording.write([report])
    return 0


def compare_with_vsepp(name, args):
    """Alternating rounds of the zoo's training step and VSE++'s own
    `VSE.train_emb` (PyTorch, in a process of its own, idle while the zoo
    runs) on the same batches; pairs/s of each."""
    from common.errors import InputError
    from models import registry
    from models.vse_config import VSEConfig

    config_class = registry.get(name).config_class
    if not issubclass(config_class, VSEConfig):
        raise InputError(f"--model {name}: VSE++ trains a VSE model (a models.vse_config.VSEConfig); "
                         f"{name}'s config is {config_class.__name__}")
    config, train_split, model = untrained_model(name, args.preset, args.set)
    model_config, train = config.model, config.train
    batches = training_batches(model, config, train_split, args.warmup + args.steps)
    # VSE++'s train.py options, set as the zoo's model.
    options = {
        "data_name": "f8k_precomp", "img_dim": train_split.images.shape[1], "embed_size": model_config.embed_dim,
        "finetune": False, "cnn_type": "vgg19", "use_abs": model_config.absolute, "no_imgnorm": False,
        "vocab_size": len(model.vectorizer.vocabulary), "word_dim": model_config.word_dim, "num_layers": 1,
        "margin": model_config.margin, "measure": "cosine", "max_violation": model_config.hinge == "max",
        "grad_clip": train.grad_clip_norm or 0, "learning_rate": train.learning_rate,
    }
    arrays = [(b["image_features"].numpy(), b["token_ids"].numpy()) for b in batches]
    # A Worker: if VSE++'s process dies (an import error in the clone, a
    # crash), the wait for it ends with its reason instead of hanging.
    with Worker(f"VSE++ of {args.vsepp}", vsepp_worker, args.vsepp, options, arrays,
                args.warmup) as worker:
        message = worker.receive()  # ready, or why not
        if isinstance(message, str):
            raise InputError(message)
        step = zoo_step(model, config, batches[: args.warmup])
        rounds = []
        for _ in range(args.rounds):
            zoo = time_steps(step, batches[args.warmup :])
            worker.send("round")
            vsepp = worker.receive()
            rates = {who: throughput(config, args.steps, seconds)["train_pairs_per_s"]
                     for who, seconds in (("zoo", zoo), ("vsepp", vsepp))}
            rounds.append({**rates, "zoo_vs_vsepp": round(rates["zoo"] / rates["vsepp"], 2)})
        worker.send("stop")
    flops = training_flops(model, batches[args.warmup :])
    return {
        "model": name,
        "preset": args.preset,
        "overrides": records.portable_arguments(args.set),
        "batch_size": train.batch_size,
        "steps_per_round": args.steps,
        # Each side's kernels' instruction set (oneDNN's caps TensorFlow's, MKL's PyTorch's products).
        "zoo_isa": str(machine.instruction_set(machine.TENSORFLOW_ISA_CAPS)),
        "vsepp_isa": str(machine.instruction_set(machine.PYTORCH_ISA_CAPS)),
        "train_gflop_per_step": None if flops is None else significant(flops / 1e9),
        "rounds_pairs_per_s": rounds,
        "median_zoo_vs_vsepp": round(float(np.median([r["zoo_vs_vsepp"] for r in rounds])), 2),
    }


def vsepp_worker(connection, path, options, batches, warmup):
    """In a process of its own: VSE++'s `VSE` (model.py of a clone of
    github.com/fartashf/vsepp at `path`) built with `options` (its train.py
    options); after `warmup` steps, times `train_emb` over the other
    batches at each "round" message and sends the seconds.

    VSE++'s code targets PyTorch 0.3 with a GPU. Three shims let today's
    CPU PyTorch run it unchanged: `Tensor.cuda` returns the tensor when
    there is no GPU; `forward_loss` is its criterion without the logging
    line (`loss.data[0]` fails on a 0-dim loss now); and a stub stands in
    for torchvision when it is missing (only VSE++'s end-to-end image
    encoder uses it, not the precomputed-feature one timed here).
    """
    import argparse as arguments
    import importlib.util
    import types

    try:
        import torch
    except ImportError:
        connection.send("VSE++ needs PyTorch: pip install torch (a CPU build will do)")
        return
    model_file = Path(path) / "model.py"
    if not model_file.is_file():
        connection.send(f"{model_file}: not found (VSEPP_CLONE is a clone of github.com/fartashf/vsepp)")
        return
    if importlib.util.find_spec("torchvision") is None:
        sys.modules["torchvision"] = types.SimpleNamespace(models=None)
        sys.modules["torchvision.models"] = types.ModuleType("torchvision.models")
    if not torch.cuda.is_available():
        torch.Tensor.cuda = lambda tensor, *args, **kwargs: tensor
    module_spec = importlib.util.spec_from_file_location("vsepp_model", model_file)
    vsepp = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(vsepp)
    vse_class = getattr(vsepp, "VSE", None)
    missing = ["VSE class"] if vse_class is None else [
        f"VSE.{method}" for method in ("train_start", "train_emb") if not callable(getattr(vse_class, method, None))]
    if missing:
        connection.send(f"{model_file}: has no {' or '.join(missing)} (VSEPP_CLONE is a clone of "
                        "github.com/fartashf/vsepp)")
        return
    vse = vse_class(arguments.Namespace(**options))
    vse.train_start()
    vse.logger = types.SimpleNamespace(update=lambda *args, **kwargs: None)
    vse.forward_loss = lambda image_embeddings, caption_embeddings, **kwargs: vse.criterion(
        image_embeddings, caption_embeddings
    )

    def step(batch):
        # VSE++'s loader sorts each batch by caption length, longest first.
        images, token_ids = batch
        lengths = np.count_nonzero(token_ids, axis=1)
        order = np.argsort(-lengths, kind="stable")
        vse.train_emb(torch.from_numpy(images[order]), torch.from_numpy(token_ids[order]).long(),
                      lengths[order].tolist())

    for batch in batches[:warmup]:
        step(batch)
    connection.send(None)
    while connection.recv() == "round":  # until "stop" (or the parent closes the pipe: EOFError)
        connection.send(time_steps(step, batches[warmup:]))


if __name__ == "__main__":
    sys.exit(main())
