"""ELECTRA's two networks over tupe's encoder, for Hugging Face transformers (model_type "tupe").

Written by `tupe-convert export --to hf` of an ELECTRA pair whose encoding transformers' own
ELECTRA classes do not compute (bert-r, bert-ad, tupe-a, tupe-r: the TUPE paper's Table 4 uses
TUPE-R in both), beside modeling_tupe.py; load with trust_remote_code=True. What changes from
modeling_tupe.py is ELECTRA's (shared/docs/electra.md section 1):

  embeddings at embedding_size E, then bert.embeddings_project (E -> hidden) where they differ
  TupeElectraForPreTraining   the discriminator: discriminator_predictions.dense (H -> H), GELU,
                              .dense_prediction (H -> 1): one logit of "replaced" per token
  TupeElectraForMaskedLM      the generator: cls.predictions.transform.dense (H -> E), GELU,
                              LayerNorm(E), the word table (tied) and a bias
  TupeElectraForSequenceClassification   tupe's head (dense + tanh on token 0) on the
                              discriminator's encoder
"""
import copy

import torch.nn as nn
import torch.nn.functional as F
from transformers.models.electra.modeling_electra import ElectraForPreTrainingOutput

from .modeling_tupe import (TupeEmbeddings, TupeEncoder, TupeForMaskedLM,
                            TupeForSequenceClassification, TupeModel, TupePooler, TupePositions,
                            TupePredictions, TupePreTrainedModel)


def embedding_size(config):
    return getattr(config, "embedding_size", None) or config.hidden_size


class TupeElectraModel(TupeModel):
    """TupeModel with its embeddings at width E, projected to the hidden width."""

    def __init__(self, config, add_pooling_layer=False):
        TupePreTrainedModel.__init__(self, config)
        E = embedding_size(config)
        narrow = copy.copy(config)
        narrow.hidden_size = E
        self.embeddings = TupeEmbeddings(narrow)
        if E != config.hidden_size:
            self.embeddings_project = nn.Linear(E, config.hidden_size)
            # applied to what the embeddings return, before the first layer
            self.embeddings.register_forward_hook(lambda m, i, out: self.embeddings_project(out))
        if config.position_embedding_type != "bert-a":
            self.tupe = TupePositions(config)
        self.encoder = TupeEncoder(config)
        self.pooler = TupePooler(config) if add_pooling_layer else None
        self.post_init()


class TupeElectraForMaskedLM(TupeForMaskedLM):
    def __init__(self, config):
        TupePreTrainedModel.__init__(self, config)
        E = embedding_size(config)
        self.bert = TupeElectraModel(config)
        self.cls = nn.Module()
        self.cls.predictions = TupePredictions(config)
        self.cls.predictions.transform.dense = nn.Linear(config.hidden_size, E)
        self.cls.predictions.transform.LayerNorm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.post_init()


class TupeElectraForPreTraining(TupePreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        D = config.hidden_size
        self.bert = TupeElectraModel(config)
        self.discriminator_predictions = nn.Module()
        self.discriminator_predictions.dense = nn.Linear(D, D)
        self.discriminator_predictions.dense_prediction = nn.Linear(D, 1)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions,
                        output_hidden_states)
        p = self.discriminator_predictions
        logits = p.dense_prediction(F.gelu(p.dense(out.last_hidden_state))).squeeze(-1)
        loss = None
        if labels is not None:  # the sigmoid loss over the non-padding tokens
            keep = (attention_mask if attention_mask is not None else labels.new_ones(labels.shape)).bool()
            loss = F.binary_cross_entropy_with_logits(logits[keep], labels[keep].to(logits.dtype))
        res = ElectraForPreTrainingOutput(loss=loss, logits=logits, hidden_states=out.hidden_states,
                                          attentions=out.attentions)
        return res if return_dict is not False else res.to_tuple()


class TupeElectraForSequenceClassification(TupeForSequenceClassification):
    def __init__(self, config):
        TupePreTrainedModel.__init__(self, config)
        self.num_labels = config.num_labels
        self.bert = TupeElectraModel(config, add_pooling_layer=True)
        p = config.classifier_dropout
        self.dropout = nn.Dropout(config.hidden_dropout_prob if p is None else p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()
