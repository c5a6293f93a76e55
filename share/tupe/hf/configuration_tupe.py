"""Configuration of a tupe model for Hugging Face transformers (model_type "tupe").

Written by `tupe-convert export --to hf` next to config.json; loaded with trust_remote_code=True.
The fields are BERT's plus the positional-encoding variant (tupe-spec.md section 2):

  position_embedding_type  bert-a | bert-r | bert-ad | tupe-a | tupe-r
  untie_cls                TUPE's [CLS] reset (false: the paper's TUPE-A tie-cls)
  attn_scale_factor        content scores scaled by 1/sqrt(head_dim * factor): 1 BERT, 2 TUPE, 4 BERT-Ad
  rel_pos_buckets, max_rel_pos   the T5 relative-position buckets (bert-r, tupe-r)
  type_vocab_size          0: no token-type embedding (token_type_ids are ignored)
"""
try:
    from transformers import PreTrainedConfig
except ImportError:  # transformers 4.x
    from transformers import PretrainedConfig as PreTrainedConfig

POSITIONS = ("bert-a", "bert-r", "bert-ad", "tupe-a", "tupe-r")


class TupeConfig(PreTrainedConfig):
    model_type = "tupe"

    def __init__(self, vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 activation_dropout=0.0, classifier_dropout=None, max_position_embeddings=512,
                 type_vocab_size=0, initializer_range=0.02, layer_norm_eps=1e-5,
                 position_embedding_type="tupe-r", untie_cls=True, attn_scale_factor=None,
                 rel_pos_buckets=32, max_rel_pos=128, pad_token_id=0, **kwargs):
        if position_embedding_type not in POSITIONS:
            raise ValueError("position_embedding_type must be one of %s, not %r"
                             % (", ".join(POSITIONS), position_embedding_type))
        if hidden_act != "gelu":
            raise ValueError("hidden_act must be 'gelu' (the exact erf GELU tupe computes)")
        factor = {"tupe-a": 2, "tupe-r": 2, "bert-ad": 4}.get(position_embedding_type, 1)
        if attn_scale_factor not in (None, factor):
            raise ValueError("attn_scale_factor %r does not go with %s (%d)"
                             % (attn_scale_factor, position_embedding_type, factor))
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.activation_dropout = activation_dropout
        self.classifier_dropout = classifier_dropout
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.position_embedding_type = position_embedding_type
        self.untie_cls = untie_cls
        self.attn_scale_factor = factor
        self.rel_pos_buckets = rel_pos_buckets
        self.max_rel_pos = max_rel_pos
        super().__init__(pad_token_id=pad_token_id, **kwargs)
