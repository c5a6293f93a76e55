"""TUPE and its baselines for Hugging Face transformers: a small reference implementation.

Ke, He & Liu, "Rethinking Positional Encoding in Language Pre-training" (ICLR 2021). Written by
`tupe-convert export --to hf` next to config.json (load with trust_remote_code=True); it
computes what libtupe computes (tupe-spec.md, man tupe-formats(5)):

  bert-a   input = LN(word + position[k] (+ token type)); scores q.k / sqrt(d)
  bert-r   bert-a plus a T5 relative bias rel_bias[bucket(j - i), h], shared by all layers
  bert-ad  input = LN(word); every layer adds LN(p_k) U^Q to q and LN(p_k) U^K to k;
           scores / sqrt(4d)
  tupe-a   input = LN(word); scores q.k / sqrt(2d) + B[h, i, j], one bias for all layers:
           B = (LN(p_i) U^Q / sqrt(2d)) . (LN(p_j) U^K) with table row k+1 for token k, and
           (untie_cls) row 0 of B = theta1 (from table row 0), column 0 = theta2 (row 1)
  tupe-r   tupe-a plus the relative bias with two [CLS] buckets (num_buckets for column 0,
           num_buckets/2 for row 0)

Layers are post-LN BERT layers with the exact erf GELU; padded positions are zeroed after the
embedding and masked as keys. Parameter names are BERT's under "bert.", the positional parts
under "bert.tupe." (pos, pos_ln, pos_q, pos_k, rel_bias).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import PreTrainedModel
from transformers.modeling_outputs import (BaseModelOutputWithPooling, MaskedLMOutput,
                                           SequenceClassifierOutput)

from .configuration_tupe import TupeConfig


def relative_buckets(n, num_buckets, max_distance, cls_buckets):
    """[n, n] T5 buckets of j - i (tupe-spec.md section 4), integers from a per-distance table."""
    half = num_buckets // 2
    exact = half // 2

    def side(d):  # bucket of distance d within one side
        if d < exact:
            return d
        b = exact + int(math.log(d / exact) / math.log(max_distance / exact) * (half - exact))
        return min(b, half - 1)

    table = torch.tensor([side(d) for d in range(n)])
    k = torch.arange(n)
    rel = k[None, :] - k[:, None]                     # j - i
    b = table[rel.abs()] + (rel > 0).long() * half    # keys to the right: the upper half
    if cls_buckets:
        b[:, 0] = num_buckets                         # others -> [CLS]
        b[0, :] = half                                # [CLS] -> others (wins at [0, 0])
    return b


class TupeEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        D = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, D)
        if config.position_embedding_type in ("bert-a", "bert-r"):
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, D)
        if config.type_vocab_size > 0:
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size, D)
        self.LayerNorm = nn.LayerNorm(D, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids, valid):
        x = self.word_embeddings(input_ids)
        if hasattr(self, "position_embeddings"):
            x = x + self.position_embeddings.weight[: input_ids.shape[1]]
        if hasattr(self, "token_type_embeddings"):
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)
            x = x + self.token_type_embeddings(token_type_ids)
        x = self.dropout(self.LayerNorm(x))
        return x * valid[..., None].to(x.dtype)       # padded rows are zero


class TupePositions(nn.Module):
    """The positional parts shared by all layers: bias [H, T, T] and/or q, k additions [T, D]."""

    def __init__(self, config):
        super().__init__()
        D, H = config.hidden_size, config.num_attention_heads
        self.kind = config.position_embedding_type
        self.untie = bool(config.untie_cls) and self.kind in ("tupe-a", "tupe-r")
        self.heads, self.head_dim = H, D // H
        self.num_buckets, self.max_distance = config.rel_pos_buckets, config.max_rel_pos
        if self.kind in ("bert-ad", "tupe-a", "tupe-r"):
            tupe = self.kind != "bert-ad"             # TUPE: row 0 = p_theta1, row 1 = p_theta2
            self.pos = nn.Embedding(config.max_position_embeddings + tupe, D)
            self.pos_ln = nn.LayerNorm(D, eps=config.layer_norm_eps)
            self.pos_q = nn.Linear(D, D)
            self.pos_k = nn.Linear(D, D)
        if self.kind in ("bert-r", "tupe-r"):
            self.rel_bias = nn.Embedding(self.num_buckets + (self.kind == "tupe-r"), H)

    def projections(self, rows):
        p = self.pos_ln(self.pos.weight[:rows])
        return self.pos_q(p), self.pos_k(p)

    def absolute_bias(self, T):
        H, d = self.heads, self.head_dim
        q, k = self.projections(T + 1)
        q = (q * (2 * d) ** -0.5).view(T + 1, H, d).transpose(0, 1)
        k = k.view(T + 1, H, d).transpose(0, 1)
        a = q @ k.transpose(1, 2)                     # [H, T+1, T+1]
        bias = a[:, 1:, 1:].clone()                   # token k reads table row k+1
        if self.untie:
            bias[:, :, 0] = a[:, 1, 1, None]          # theta2: others -> [CLS]
            bias[:, 0, :] = a[:, 0, 0, None]          # theta1: [CLS] -> others
        return bias

    def relative_bias(self, T, device):
        b = relative_buckets(T, self.num_buckets, self.max_distance, self.untie).to(device)
        return self.rel_bias(b).permute(2, 0, 1)      # [H, T, T]

    def forward(self, T, device):
        """(bias [H, T, T] or None, q addition [T, D] or None, k addition [T, D] or None)."""
        if self.kind == "bert-ad":
            q, k = self.projections(T)
            return None, q, k
        bias = None
        if self.kind in ("tupe-a", "tupe-r"):
            bias = self.absolute_bias(T)
        if self.kind in ("bert-r", "tupe-r"):
            r = self.relative_bias(T, device)
            bias = r if bias is None else bias + r
        return bias, None, None


class TupeSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        D = config.hidden_size
        self.heads = config.num_attention_heads
        self.scale = (D // self.heads * config.attn_scale_factor) ** -0.5
        self.query, self.key, self.value = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, x, additive, pos_q, pos_k):
        B, T, D = x.shape
        q, k, v = self.query(x), self.key(x), self.value(x)
        if pos_q is not None:                         # bert-ad
            q, k = q + pos_q, k + pos_k

        def heads(t):
            return t.view(B, T, self.heads, D // self.heads).transpose(1, 2)

        scores = (heads(q) * self.scale) @ heads(k).transpose(-1, -2) + additive
        probs = torch.softmax(scores, dim=-1)
        ctx = self.dropout(probs) @ heads(v)
        return ctx.transpose(1, 2).reshape(B, T, D), probs


class TupeDenseLayerNorm(nn.Module):
    """dense, dropout, residual, LayerNorm: BERT's attention.output and output."""

    def __init__(self, n_in, config):
        super().__init__()
        self.dense = nn.Linear(n_in, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(residual + self.dropout(self.dense(h)))


class TupeAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = TupeSelfAttention(config)
        self.output = TupeDenseLayerNorm(config.hidden_size, config)


class TupeIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.dropout = nn.Dropout(config.activation_dropout)

    def forward(self, x):
        return self.dropout(F.gelu(self.dense(x)))


class TupeLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = TupeAttention(config)
        self.intermediate = TupeIntermediate(config)
        self.output = TupeDenseLayerNorm(config.intermediate_size, config)

    def forward(self, x, additive, pos_q, pos_k):
        ctx, probs = self.attention.self(x, additive, pos_q, pos_k)
        x = self.attention.output(ctx, x)
        return self.output(self.intermediate(x), x), probs


class TupeEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList(TupeLayer(config) for _ in range(config.num_hidden_layers))


class TupePooler(nn.Module):
    """dense + tanh on token 0: the first half of tupe's classification head."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class TupePreTrainedModel(PreTrainedModel):
    config_class = TupeConfig
    base_model_prefix = "bert"

    def _init_weights(self, module):
        """BERT's initialization (only for parameters a checkpoint does not bring)."""
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, std)
            if isinstance(module, nn.Linear):
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.weight.data.fill_(1.0)
            module.bias.data.zero_()
        elif isinstance(module, TupePredictions):
            module.bias.data.zero_()


class TupeModel(TupePreTrainedModel):
    def __init__(self, config, add_pooling_layer=True):
        super().__init__(config)
        self.embeddings = TupeEmbeddings(config)
        if config.position_embedding_type != "bert-a":
            self.tupe = TupePositions(config)
        self.encoder = TupeEncoder(config)
        self.pooler = TupePooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        B, T = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        valid = attention_mask.bool()
        x = self.embeddings(input_ids, token_type_ids, valid)
        # One additive term for every layer: the shared positional bias and the key mask.
        additive = torch.zeros(B, 1, 1, T, dtype=x.dtype, device=x.device)
        additive = additive.masked_fill(~valid[:, None, None, :], torch.finfo(x.dtype).min)
        pos_q = pos_k = None
        if hasattr(self, "tupe"):
            bias, pos_q, pos_k = self.tupe(T, x.device)
            if bias is not None:
                additive = additive + bias[None]
        hidden, attentions = (x,), ()
        for layer in self.encoder.layer:
            x, probs = layer(x, additive, pos_q, pos_k)
            hidden, attentions = hidden + (x,), attentions + (probs,)
        out = BaseModelOutputWithPooling(
            last_hidden_state=x,
            pooler_output=self.pooler(x) if self.pooler is not None else None,
            hidden_states=hidden if output_hidden_states else None,
            attentions=attentions if output_attentions else None)
        return out if return_dict is not False else out.to_tuple()


class TupePredictions(nn.Module):
    """dense, GELU, LayerNorm, then the word embeddings (tied) and a bias."""

    def __init__(self, config):
        super().__init__()
        self.transform = nn.Module()
        self.transform.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, x, word_embeddings):
        h = self.transform.LayerNorm(F.gelu(self.transform.dense(x)))
        return F.linear(h, word_embeddings, self.bias)


class TupeForMaskedLM(TupePreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.bert = TupeModel(config, add_pooling_layer=False)
        self.cls = nn.Module()
        self.cls.predictions = TupePredictions(config)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions,
                        output_hidden_states)
        logits = self.cls.predictions(out.last_hidden_state,
                                      self.bert.embeddings.word_embeddings.weight)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1),
                                   ignore_index=-100)
        res = MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                             attentions=out.attentions)
        return res if return_dict is not False else res.to_tuple()


class TupeForSequenceClassification(TupePreTrainedModel):
    """tupe's head: token 0 -> dense -> tanh (the pooler) -> dropout -> classifier."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = TupeModel(config)
        p = config.classifier_dropout
        self.dropout = nn.Dropout(config.hidden_dropout_prob if p is None else p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions,
                        output_hidden_states)
        logits = self.classifier(self.dropout(out.pooler_output))
        loss = None
        if labels is not None:
            if self.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
            else:
                loss = F.cross_entropy(logits, labels.view(-1))
        res = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                       attentions=out.attentions)
        return res if return_dict is not False else res.to_tuple()
