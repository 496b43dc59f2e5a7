-- lt.models: a small model zoo. The torchvision models are built as
-- torchvision builds them, module tree and parameter names included, so
-- their checkpoints (converted to safetensors) load strictly with
-- m:load_state_dict(lt.load(path)):
--
--   lt.models.resnet18{num_classes=1000, zero_init_residual=false}     11,689,512 parameters
--   resnet34 resnet50 resnet101 resnet152 resnext50_32x4d wide_resnet50_2
--   lt.models.vgg11{batch_norm=false, num_classes=1000, dropout=0.5}   132,863,336 parameters
--   vgg11_bn vgg13(_bn) vgg16(_bn) vgg19(_bn)   and vgg(cfg, {pool=, hidden=, in_channels=, ...})
--   lt.models.mlp({784, 256, 10}, {activation="relu", dropout=0})
--   lt.models.gpt{vocab_size=, block_size=, n_layer=, n_head=, n_embd=}   nanoGPT's GPT (lt/models/gpt.lua)
--   lt.models.bert(config), lt.models.bert.from_pretrained(dir)   Hugging Face BertModel (lt/models/bert.lua)
--
-- Every constructor also takes dtype= and device=. The building blocks are
-- here too: ResNet, BasicBlock, Bottleneck, VGG, make_layers, cfgs.
-- Loaded on first use of lt.models (lt's start-up does not pay for it).
local M = {}

for _, family in ipairs { "resnet", "vgg", "mlp", "gpt", "bert" } do
  for name, v in pairs(require("lt.models." .. family)) do M[name] = v end
end

return M
