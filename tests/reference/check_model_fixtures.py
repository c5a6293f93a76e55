#!/usr/bin/env python3
"""Self-checks that guard the PyTorch reference (tupe_ref.py) and its fixtures.

Run by hand after changing the reference (not by `make check`):
    python3 tests/reference/check_model_fixtures.py

Checks, each printed as "ok"/"FAIL" with its figures:
  buckets     relative_bucket against the explicit table of spec §4 (distances 0..511, both
              sides), the 33-bucket [CLS] form, and transformers' T5 bucket function
  gradcheck   torch.autograd.gradcheck in float64 of the loss with respect to every parameter,
              for every variant and both heads, on a micro configuration
  fd          central finite differences (float64) on random entries of every tensor of every
              fixture, against the fixture's gradients
  naive       a second, loop-based numpy forward written from contract §3 (explicit per-head,
              per-token attention, explicit bias table) against out.logits and out.pos_bias
  reset       the [CLS] pattern of out.pos_bias: row 0 all θ1, column 0 below it all θ2 (untied);
              no such pattern with tie-cls
  fixtures    every fixture recomputed in float64 (identical) and in float32 (the fp32 noise
              floor a C implementation should see, relative to each tensor's max)
  adam        adam.loss decreases; adam.loss[0] == out.loss; clipping active where intended
  counts      parameter counts of bert-base (V = 32,769) per variant against spec §3
  hf          BERT-A equals transformers' BertForMaskedLM (logits, loss, every gradient) and
              reg-bert-a equals BertForSequenceClassification (regression), float64
  sdpa        the benchmark's scaled_dot_product_attention path equals the matmul path
  dropout     dropout honours the configuration (rate, eval mode)

Packages: torch, safetensors, numpy, transformers (PyPI).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tupe_ref as R  # noqa: E402
import make_model_fixtures as MF  # noqa: E402

FAILED = []


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    if not ok:
        FAILED.append(name)


def fixture(case):
    return os.path.join(MF.OUT, case + ".safetensors")


# ---- buckets -----------------------------------------------------------------------------------

def spec_bucket(n):
    """Spec §4 explicit table, one side (j <= i), distance n >= 0."""
    for lo, hi, b in [(0, 7, None), (8, 11, 8), (12, 15, 9), (16, 22, 10), (23, 31, 11),
                      (32, 45, 12), (46, 63, 13), (64, 90, 14)]:
        if lo <= n <= hi:
            return n if b is None else b
    return 15


def check_buckets():
    n = torch.arange(512)
    left = R.relative_bucket(-n)          # j - i = -n: key left of (or at) the query
    right = R.relative_bucket(n)          # key right of the query
    ok_l = all(int(left[k]) == spec_bucket(k) for k in range(512))
    ok_r = all(int(right[k]) == 16 + spec_bucket(k) for k in range(1, 512)) and int(right[0]) == 0
    report("buckets/32", ok_l and ok_r, "distances 0..511 both sides match spec §4")
    t = R.bucket_table(512)
    i, j = torch.meshgrid(torch.arange(512), torch.arange(512), indexing="ij")
    want = torch.where(j > i, 16 + torch.tensor([spec_bucket(k) for k in range(512)])[(j - i).abs()],
                       torch.tensor([spec_bucket(k) for k in range(512)])[(i - j).abs()])
    report("buckets/table", torch.equal(t, want), "512x512 table, 32 rows used: "
           f"{sorted(set(t.flatten().tolist())) == list(range(16)) + list(range(17, 32))}")
    c = R.bucket_table(512, cls_buckets=True)
    ok = (c[0] == 16).all() and (c[1:, 0] == 32).all() and torch.equal(c[1:, 1:], want[1:, 1:])
    report("buckets/33", bool(ok), "row 0 = 16 (incl. [0,0]), column 0 = 32 below it, rest as table")
    try:
        from transformers.models.t5.modeling_t5 import T5Attention
        rel = torch.arange(-600, 601)
        hf = T5Attention._relative_position_bucket(rel, True, 32, 128)
        report("buckets/t5", torch.equal(hf, R.relative_bucket(rel)), "equals transformers T5 for j-i in -600..600")
    except ImportError:
        report("buckets/t5", False, "transformers not installed")


# ---- gradcheck ---------------------------------------------------------------------------------

def micro_config(position, untie, num_labels):
    return R.make_config("tiny", vocab_size=11, hidden_size=8, num_attention_heads=2,
                         intermediate_size=12, num_hidden_layers=2, max_position_embeddings=8,
                         position=position, untie_cls=untie, num_labels=num_labels,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                         activation_dropout=0.0, classifier_dropout=0.0)


def check_gradcheck():
    from torch.func import functional_call
    cases = [(c, p, u, 0) for c, (p, u) in R.VARIANTS.items()]
    cases += [("cls-tupe-r", "tupe-r", True, 3), ("reg-bert-a", "bert-a", True, 1)]
    for case, position, untie, nl in cases:
        cfg = micro_config(position, untie, nl)
        torch.manual_seed(7)
        model = R.TupeModel(cfg).double().eval()
        with torch.no_grad():        # no parameter at a trivial value
            for name, p in model.named_parameters():
                p.normal_(0, 0.5)
                if "LayerNorm" in name and name.endswith("weight"):
                    p.add_(1.0)
        ids = torch.randint(3, 11, (2, 6))
        ids[:, 0] = 2
        lengths = torch.tensor([6, 4])
        mp = torch.tensor([0, 3, 7, 9])
        labels = (torch.tensor([1, 5, 2, 8]) if nl == 0 else
                  torch.tensor([0, 2]) if nl > 1 else torch.tensor([0.3, -0.7], dtype=torch.float64))
        names = [n for n, _ in model.named_parameters()]
        params = tuple(p.detach().clone().requires_grad_(True) for _, p in model.named_parameters())

        def f(*ps):
            out = functional_call(model, dict(zip(names, ps)), (ids, lengths, mp if nl == 0 else None))
            return model.loss(out, labels)

        n = sum(p.numel() for p in params)
        ok = torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-7, rtol=1e-6, raise_exception=False)
        report(f"gradcheck/{case}", ok, f"{n} parameters, {len(params)} tensors")


# ---- finite differences on the fixtures ----------------------------------------------------------

def batch_loss(model, batch):
    out = model(batch["ids"], batch["lengths"], batch["mask_pos"])
    return model.loss(out, batch["labels"])


def check_fd():
    gen = torch.Generator().manual_seed(3)
    for case in MF.CASES:
        model, batch, exp, _ = R.load_fixture(fixture(case))
        worst, count = 0.0, 0
        params = dict(model.named_parameters())
        for name, p in params.items():
            g = exp["grad." + name].double().flatten()
            picks = torch.randint(0, p.numel(), (4,), generator=gen).tolist()
            picks.append(int(g.abs().argmax()))
            for idx in picks:
                flat = p.data.view(-1)
                old = float(flat[idx])
                h = 1e-5
                with torch.no_grad():
                    flat[idx] = old + h
                    lp = float(batch_loss(model, batch))
                    flat[idx] = old - h
                    lm = float(batch_loss(model, batch))
                    flat[idx] = old
                fd = (lp - lm) / (2 * h)
                worst = max(worst, abs(fd - float(g[idx])) / max(1.0, abs(fd)))
                count += 1
        report(f"fd/{case}", worst < 1e-6, f"{count} entries, max |fd - grad| = {worst:.2e}")


# ---- a naive second forward (numpy, loops) -------------------------------------------------------

def np_ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def spec_bucket_ij(i, j, cls):
    """Bucket of query i, key j from the spec table; cls: TUPE-R [CLS] buckets."""
    if cls and i == 0:
        return 16
    if cls and j == 0:
        return 32
    return spec_bucket(i - j) if j <= i else 16 + spec_bucket(j - i)


def naive_forward(p, cfg, ids, lengths, mask_pos):
    """Contract §3 term by term, per batch element, head, query and key."""
    L, D, H = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"]
    d = D // H
    pos, untie = cfg["position"], cfg["untie_cls"]
    Bn, T = ids.shape
    lin = lambda x, n: x @ p[n + ".weight"].T + p[n + ".bias"]  # noqa: E731
    # bias table [H, T, T] and bert-ad projections
    bias = np.zeros((H, T, T))
    pq = pk = None
    if pos in ("tupe-a", "tupe-r"):
        s = 1.0 / math.sqrt(2 * d)
        rows = np_ln(p["position.embeddings.weight"][: T + 1], p["position.LayerNorm.weight"],
                     p["position.LayerNorm.bias"])
        uq, uk = lin(rows, "position.query"), lin(rows, "position.key")
        for h in range(H):
            cols = slice(h * d, (h + 1) * d)
            a = lambda r, c: s * float(uq[r, cols] @ uk[c, cols])  # noqa: E731
            for i in range(T):
                for j in range(T):
                    if untie and i == 0:
                        bias[h, i, j] = a(0, 0)
                    elif untie and j == 0:
                        bias[h, i, j] = a(1, 1)
                    else:
                        bias[h, i, j] = a(i + 1, j + 1)
    if pos in ("bert-r", "tupe-r"):
        rel = p["position.relative_bias.weight"]
        for h in range(H):
            for i in range(T):
                for j in range(T):
                    bias[h, i, j] += rel[spec_bucket_ij(i, j, pos == "tupe-r" and untie), h]
    if pos == "bert-ad":
        rows = np_ln(p["position.embeddings.weight"][:T], p["position.LayerNorm.weight"],
                     p["position.LayerNorm.bias"])
        pq, pk = lin(rows, "position.query"), lin(rows, "position.key")
    scale = {"bert-a": d ** -0.5, "bert-r": d ** -0.5, "bert-ad": (4 * d) ** -0.5}.get(pos, (2 * d) ** -0.5)
    hidden = np.zeros((Bn, T, D))
    for b in range(Bn):
        n = int(lengths[b])
        x = p["embeddings.word_embeddings.weight"][ids[b]]
        if pos in ("bert-a", "bert-r"):
            x = x + p["embeddings.position_embeddings.weight"][:T]
        x = np_ln(x, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"])
        x[n:] = 0.0
        for l in range(L):
            pre = f"encoder.layer.{l}."
            q, k, v = (lin(x, pre + "attention.self." + w) for w in ("query", "key", "value"))
            if pq is not None:
                q, k = q + pq, k + pk
            ctx = np.zeros((T, D))
            for h in range(H):
                cols = slice(h * d, (h + 1) * d)
                for i in range(T):
                    sc = np.array([scale * float(q[i, cols] @ k[j, cols]) + bias[h, i, j]
                                   for j in range(n)])
                    w = np.exp(sc - sc.max())
                    w /= w.sum()
                    ctx[i, cols] = w @ v[:n, cols]
            x = np_ln(x + lin(ctx, pre + "attention.output.dense"),
                      p[pre + "attention.output.LayerNorm.weight"], p[pre + "attention.output.LayerNorm.bias"])
            f = lin(np_gelu(lin(x, pre + "intermediate.dense")), pre + "output.dense")
            x = np_ln(x + f, p[pre + "output.LayerNorm.weight"], p[pre + "output.LayerNorm.bias"])
        hidden[b] = x
    if cfg["num_labels"] > 0:
        return np.tanh(lin(hidden[:, 0], "classifier.dense")) @ p["classifier.out_proj.weight"].T \
            + p["classifier.out_proj.bias"], (bias if pos in ("bert-r", "tupe-a", "tupe-r") else None)
    h = hidden.reshape(Bn * T, D)[mask_pos]
    h = np_ln(np_gelu(lin(h, "cls.predictions.transform.dense")),
              p["cls.predictions.transform.LayerNorm.weight"], p["cls.predictions.transform.LayerNorm.bias"])
    logits = h @ p["embeddings.word_embeddings.weight"].T + p["cls.predictions.bias"]
    return logits, (bias if pos in ("bert-r", "tupe-a", "tupe-r") else None)


def check_naive():
    for case in MF.CASES:
        model, batch, exp, meta = R.load_fixture(fixture(case))
        p = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        mp = batch["mask_pos"].numpy() if batch["mask_pos"] is not None else None
        logits, bias = naive_forward(p, meta["config"], batch["ids"].numpy().astype(np.int64),
                                     batch["lengths"].numpy(), mp)
        e = float(np.abs(logits - exp["out.logits"].double().numpy()).max())
        eb = 0.0 if bias is None else float(np.abs(bias - exp["out.pos_bias"].double().numpy()).max())
        has = ("out.pos_bias" in exp) == (bias is not None)
        report(f"naive/{case}", e < 1e-6 and eb < 1e-6 and has,
               f"max |logits - naive| = {e:.1e}, pos_bias {eb:.1e}, pos_bias present as expected: {has}")


# ---- [CLS] reset ----------------------------------------------------------------------------------

def check_reset():
    for case in ("tupe-a", "tupe-r", "cls-tupe-r", "tupe-a-tie"):
        model, batch, exp, meta = R.load_fixture(fixture(case))
        b = exp["out.pos_bias"].double()
        row0 = bool((b[:, 0, :] == b[:, 0, :1]).all())
        col0 = bool((b[:, 1:, 0] == b[:, 1:2, 0]).all())
        distinct = bool((b[:, 0, 0] != b[:, 1, 0]).all())
        # θ1, θ2 from the table rows 0 and 1, by hand.
        pm = dict(model.named_parameters())
        H, D = meta["config"]["num_attention_heads"], meta["config"]["hidden_size"]
        d = D // H
        with torch.no_grad():
            rows = F.layer_norm(pm["position.embeddings.weight"][:2], (D,), pm["position.LayerNorm.weight"],
                                pm["position.LayerNorm.bias"], 1e-5)
            q = F.linear(rows, pm["position.query.weight"], pm["position.query.bias"]) / math.sqrt(2 * d)
            k = F.linear(rows, pm["position.key.weight"], pm["position.key.bias"])
            th1 = torch.stack([q[0, h * d:(h + 1) * d] @ k[0, h * d:(h + 1) * d] for h in range(H)])
            th2 = torch.stack([q[1, h * d:(h + 1) * d] @ k[1, h * d:(h + 1) * d] for h in range(H)])
            if meta["config"]["position"] == "tupe-r":
                rel = pm["position.relative_bias.weight"]
                th1, th2 = th1 + rel[16], th2 + rel[32]
        e = max(float((b[:, 0, 0] - th1).abs().max()), float((b[:, 1, 0] - th2).abs().max()))
        if meta["config"]["untie_cls"]:
            report(f"reset/{case}", row0 and col0 and distinct and e < 1e-6,
                   f"row 0 constant {row0}, column 0 constant {col0}, θ1 != θ2 {distinct}, "
                   f"|θ - hand| = {e:.1e}")
        else:
            report(f"reset/{case}", not row0 and not col0,
                   f"tie-cls: row 0 constant {row0}, column 0 constant {col0} (both should be False); "
                   f"table row 0 gradient max {float(exp['grad.position.embeddings.weight'][0].abs().max()):.1e}")
    model, batch, exp, meta = R.load_fixture(fixture("tupe-a-tie"))
    g = exp["grad.position.embeddings.weight"]
    report("reset/tie-row0", bool((g[0] == 0).all()) and bool((g[1] != 0).any()),
           "tie-cls: table row 0 gets zero gradient, row 1 (token 0) does not")
    model, batch, exp, meta = R.load_fixture(fixture("tupe-r"))
    g = exp["grad.position.relative_bias.weight"]
    report("reset/buckets", bool((g[16] != 0).all()) and bool((g[32] != 0).all()),
           "tupe-r: buckets 16 and 32 get gradient")


# ---- fixtures recomputed -----------------------------------------------------------------------------

def recompute(case, dtype):
    model, batch, exp, meta = R.load_fixture(fixture(case), dtype)
    out = model(batch["ids"], batch["lengths"], batch["mask_pos"])
    loss = model.loss(out, batch["labels"])
    loss.backward()
    got = {"out.logits": out["logits"], "out.loss": loss}
    if out["pos_bias"] is not None:
        got["out.pos_bias"] = out["pos_bias"]
    for n, p in model.named_parameters():
        got["grad." + n] = p.grad
    return got, exp


def check_fixtures():
    rows = []
    for case in MF.CASES:
        got64, exp = recompute(case, torch.float64)
        same = all(torch.equal(got64[k].detach().float(), exp[k]) for k in got64)
        extra = set(k for k in exp if k.startswith(("out.", "grad."))) ^ set(got64)
        report(f"fixtures/{case}", same and not extra, "float64 recomputation identical; tensor set matches")
        got32, _ = recompute(case, torch.float32)
        worst_abs, worst_rel, zero, small = 0.0, 0.0, [], []
        for k, v in got32.items():
            ref = exp[k].double()
            err = float((v.detach().double() - ref).abs().max())
            m = float(ref.abs().max())
            worst_abs = max(worst_abs, err)
            if m < 1e-12:          # zero in exact arithmetic (e.g. attention key biases)
                zero.append((k, err))
                continue
            worst_rel = max(worst_rel, err / m)
            if k.startswith("grad."):
                small.append((m, k))
        rows.append((case, worst_abs, worst_rel, zero, sorted(small)[:3]))
    print("     fp32 reference vs the float64 fixtures (what a correct fp32 implementation sees):")
    for case, a, r, zero, small in rows:
        print(f"       {case}: max abs err {a:.1e}; max err / tensor max {r:.1e} over tensors not zero;")
        print(f"         zero in exact arithmetic ({len(zero)}): "
              + ", ".join(f"{k[5:]} (fp32 {e:.0e})" for k, e in zero))
        print("         smallest gradient tensors: " + ", ".join(f"{k[5:]} {m:.1e}" for m, k in small))


# ---- adam ---------------------------------------------------------------------------------------------

def check_adam():
    for case in MF.CASES:
        model, batch, exp, meta = R.load_fixture(fixture(case))
        l = exp["adam.loss"]
        dec = bool((l[1:] < l[:-1]).all())
        first = bool(l[0] == exp["out.loss"])
        a = meta["adam"]
        norm = math.sqrt(sum(float((exp["grad." + n].double() ** 2).sum()) for n, _ in model.named_parameters()))
        report(f"adam/{case}", dec and first,
               f"losses {[round(float(x), 5) for x in l]}; first grad norm {norm:.3f} vs clip {a['clip']} "
               f"({'clipped' if norm > a['clip'] else 'not clipped'}), exclude_ln_bias {a['exclude_ln_bias']}")
    # The same 5 steps in float32: the noise floor of adam.loss / adam.param for an fp32 side.
    worst_l, worst_p = 0.0, 0.0
    for case in MF.CASES:
        model, batch, exp, meta = R.load_fixture(fixture(case), torch.float32)
        a = meta["adam"]
        opt = R.AdamW(model, lr=a["lr"], betas=a["betas"], eps=a["eps"], weight_decay=a["weight_decay"],
                      clip=a["clip"], warmup=a["warmup"], total=a["total"], exclude_ln_bias=a["exclude_ln_bias"])
        losses = []
        for _ in range(len(exp["adam.loss"])):
            model.zero_grad(set_to_none=True)
            loss = batch_loss(model, batch)
            loss.backward()
            losses.append(float(loss.detach()))
            opt.step()
        worst_l = max(worst_l, float((torch.tensor(losses) - exp["adam.loss"]).abs().max()))
        pm = dict(model.named_parameters())
        for k in exp:
            if k.startswith("adam.param."):
                worst_p = max(worst_p, float((pm[k[len("adam.param."):]].detach() - exp[k]).abs().max()))
    report("adam/fp32", worst_l < 1e-5, f"fp32 reference vs fixtures: max |adam.loss diff| {worst_l:.1e}, "
           f"max |adam.param diff| {worst_p:.1e}")
    # The last step has lr 0 (t = total): parameters after step 5 equal those after step 4.
    opt = R.AdamW(R.TupeModel(micro_config("bert-a", True, 0)), lr=1e-3, warmup=2, total=5)
    lrs = [opt.lr_at(t) for t in range(1, 6)]
    report("adam/schedule", np.allclose(lrs, [5e-4, 1e-3, 2e-3 / 3, 1e-3 / 3, 0.0]), f"lr by step {lrs}")


# ---- parameter counts ------------------------------------------------------------------------------------

def check_counts():
    V = 32769
    counts = {}
    for case, (pos, untie) in R.VARIANTS.items():
        m = R.TupeModel(R.make_config("bert-base", vocab_size=V, position=pos, untie_cls=untie))
        total = sum(p.numel() for p in m.parameters())
        head = sum(p.numel() for n, p in m.named_parameters() if n.startswith("cls."))
        counts[case] = (total, head)
    # A table-less encoder: bert-a minus its position table.
    tableless = counts["bert-a"][0] - 512 * 768
    head = counts["tupe-a"][1]
    rows = [f"{c}: {t:,} ({t - h:,} without the MLM head)" for c, (t, h) in counts.items()]
    print("     bert-base, V = 32,769: " + "; ".join(rows))
    report("counts/tupe-a-overhead", counts["tupe-a"][0] - tableless == 1576704,
           f"TUPE-A - table-less encoder = {counts['tupe-a'][0] - tableless:,} (spec 1,576,704)")
    report("counts/tupe-r-overhead", counts["tupe-r"][0] - counts["tupe-a"][0] == 396,
           f"TUPE-R - TUPE-A = {counts['tupe-r'][0] - counts['tupe-a'][0]} (spec 396)")
    report("counts/fairseq", counts["tupe-a"][0] - (tableless + 514 * 768) == 1181952,
           f"TUPE-A - fairseq BERT-A (514-row table) = {counts['tupe-a'][0] - tableless - 514 * 768:,} "
           f"(spec 1,181,952)")
    ta, tr = counts["tupe-a"][0], counts["tupe-r"][0]
    report("counts/full", ta == 112424193 and tr == 112424589,
           f"TUPE-A {ta:,} (spec 112,424,193), TUPE-R {tr:,} (spec 112,424,589): the spec's totals "
           f"include the MLM head ({head:,} = dense {768 * 768 + 768:,} + LN 1,536 + vocab bias {V:,}; "
           f"decoder tied); without it {ta - head:,} / {tr - head:,}")
    bt = counts["bert-a"][0] - counts["bert-a"][1]
    report("counts/hf-bert", bt + 2 * 768 - 32769 * 768 + 30522 * 768 + 590592 == 109482240,
           f"BERT-A encoder {bt:,}; with HF's 30,522 vocab, 2 type rows and pooler it is BertModel's 109,482,240")
    ad = counts["bert-ad"][0]
    report("counts/bert-ad", ad - tableless == 512 * 768 + 2 * (768 * 768 + 768) + 1536,
           f"BERT-Ad - table-less = {ad - tableless:,} (512-row table + U^Q, U^K + LN)")
    br = counts["bert-r"][0]
    report("counts/bert-r", br - counts["bert-a"][0] == 32 * 12, f"BERT-R - BERT-A = {br - counts['bert-a'][0]} (32 x 12)")


# ---- Hugging Face BERT ------------------------------------------------------------------------------------

def hf_state(model):
    """Our state dict under transformers' BERT names (the head as pooler + classifier)."""
    sd = {}
    for k, v in model.state_dict().items():
        if k.startswith(("embeddings.", "encoder.")):
            sd["bert." + k] = v
        elif k.startswith("classifier.dense."):
            sd["bert.pooler.dense." + k.split(".")[-1]] = v
        elif k.startswith("classifier.out_proj."):
            sd["classifier." + k.split(".")[-1]] = v
        else:
            sd[k] = v
    D = model.config["hidden_size"]
    sd["bert.embeddings.token_type_embeddings.weight"] = torch.zeros(1, D, dtype=torch.float64)
    return sd


def check_hf():
    try:
        import transformers
        from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification
    except ImportError:
        report("hf", False, "transformers not installed")
        return
    for case in ("bert-a", "reg-bert-a"):
        model, batch, exp, meta = R.load_fixture(fixture(case))
        c = meta["config"]
        hc = BertConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"],
                        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
                        intermediate_size=c["intermediate_size"], hidden_act="gelu",
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        max_position_embeddings=c["max_position_embeddings"], type_vocab_size=1,
                        layer_norm_eps=c["layer_norm_eps"], num_labels=max(1, c["num_labels"]),
                        problem_type="regression" if c["num_labels"] == 1 else None,
                        tie_word_embeddings=True)
        hc._attn_implementation = "eager"
        cls = BertForMaskedLM if c["num_labels"] == 0 else BertForSequenceClassification
        hf = cls(hc).double().eval()
        sd = hf_state(model)
        if c["num_labels"] == 0:
            sd["cls.predictions.decoder.weight"] = sd["bert.embeddings.word_embeddings.weight"]
            sd["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"]
        missing, unexpected = hf.load_state_dict(sd, strict=False)
        missing = [k for k in missing if "position_ids" not in k]
        ids, lengths = batch["ids"].long(), batch["lengths"].long()
        am = (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()
        out = hf(input_ids=ids, attention_mask=am, token_type_ids=torch.zeros_like(ids))
        B, T = ids.shape
        if c["num_labels"] == 0:
            logits = out.logits.reshape(B * T, -1)[batch["mask_pos"].long()]
            loss = F.cross_entropy(logits, batch["labels"].long())
        else:
            logits = out.logits
            loss = ((logits.squeeze(-1) - batch["labels"].double()) ** 2).mean()
        loss.backward()
        mine = model(batch["ids"], batch["lengths"], batch["mask_pos"])
        mloss = model.loss(mine, batch["labels"])
        mloss.backward()
        hp = dict(hf.named_parameters())
        worst = 0.0
        for n, p in model.named_parameters():
            hn = ("bert." + n if n.startswith(("embeddings.", "encoder.")) else
                  "bert.pooler.dense." + n.split(".")[-1] if n.startswith("classifier.dense.") else
                  "classifier." + n.split(".")[-1] if n.startswith("classifier.out_proj.") else n)
            if n == "cls.predictions.bias" and hn not in hp:
                hn = "cls.predictions.decoder.bias"
            worst = max(worst, float((p.grad - hp[hn].grad).abs().max()))
        el = float((logits - mine["logits"]).detach().abs().max())
        report(f"hf/{case}", el < 1e-10 and worst < 1e-10 and not missing and not unexpected,
               f"transformers {transformers.__version__} {cls.__name__}: max |logits diff| {el:.1e}, "
               f"loss diff {abs(float(loss - mloss)):.1e}, max grad diff {worst:.1e}, "
               f"missing {missing}, unexpected {unexpected}")


# ---- sdpa and dropout ------------------------------------------------------------------------------------------

def check_sdpa():
    for case in MF.CASES:
        m1, batch, exp, meta = R.load_fixture(fixture(case))
        m2 = R.TupeModel(meta["config"], sdpa=True).double().eval()
        m2.load_state_dict(m1.state_dict())
        for m in (m1, m2):
            batch_loss(m, batch).backward()
        e = max(float((a.grad - b.grad).abs().max()) for a, b in zip(m1.parameters(), m2.parameters()))
        report(f"sdpa/{case}", e < 1e-10, f"max grad diff {e:.1e}")


def check_dropout():
    cfg = R.make_config("tiny", vocab_size=97, hidden_dropout_prob=0.25)
    m = R.TupeModel(cfg)
    ids = torch.randint(5, 97, (64, 64))
    lengths = torch.full((64,), 64)
    valid = torch.ones(64, 64, dtype=torch.bool)
    m.train()
    x = m.embeddings(ids, valid, None)
    rate = float((x == 0).double().mean())
    m.eval()
    y = m.embeddings(ids, valid, None)
    o1, o2 = m(ids[:2], lengths[:2], torch.tensor([0, 1])), m(ids[:2], lengths[:2], torch.tensor([0, 1]))
    report("dropout", abs(rate - 0.25) < 0.01 and bool((y != 0).all()) and torch.equal(o1["logits"], o2["logits"]),
           f"embedding dropout rate {rate:.4f} at p = 0.25; eval mode deterministic")


def main():
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    only = sys.argv[1:]
    checks = [("buckets", check_buckets), ("counts", check_counts), ("reset", check_reset),
              ("adam", check_adam), ("fixtures", check_fixtures), ("naive", check_naive),
              ("hf", check_hf), ("sdpa", check_sdpa), ("dropout", check_dropout),
              ("fd", check_fd), ("gradcheck", check_gradcheck)]
    for name, fn in checks:
        if not only or name in only:
            fn()
    print(f"{len(FAILED)} failed" + (f": {FAILED}" if FAILED else ""))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
