# PyTorch's twin of scripts/bench/transformer_steps.lua: prints "name median_ms best_ms median_cpu_ms".
#   python transformer_steps.py NAME REPEATS [MINILM_DIR]
# The GPT is nanoGPT's model as tests/fixtures/gen_gpt_fixture.py writes it; MiniLM is
# sentence-transformers' SentenceTransformer(dir) (BERT, mean pooling, Normalize).
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "fixtures"))

name = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
minilm_dir = sys.argv[3] if len(sys.argv) > 3 else None
torch.set_num_threads(1)
torch.manual_seed(0)


def gpl3_vocab():
    with open("/usr/share/common-licenses/GPL-3", "rb") as f:
        return len(set(f.read()))


def gpt_step():
    from gen_gpt_fixture import GPT
    vocab, B, T = gpl3_vocab(), 32, 64
    model = GPT(dict(block_size=T, n_layer=3, n_head=4, n_embd=96, dropout=0.0, bias=True, vocab_size=vocab))
    model.train()
    opt = model.configure_optimizers(0.1, 3e-3, (0.9, 0.95))
    x, y = torch.randint(0, vocab, (B, T)), torch.randint(0, vocab, (B, T))

    def step():
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss.item()
    return step


def minilm_model():
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(minilm_dir, device="cpu")


def minilm_batch(model, n):
    vocab = model[0].auto_model.config.vocab_size
    return {"input_ids": torch.randint(0, vocab, (n, 64)), "token_type_ids": torch.zeros(n, 64, dtype=torch.long),
            "attention_mask": torch.ones(n, 64, dtype=torch.long)}


def minilm_inference():
    model = minilm_model()
    model.eval()
    batch = minilm_batch(model, 32)

    def step():
        with torch.no_grad():
            model(dict(batch))["sentence_embedding"]
    return step


def minilm_finetune():
    model = minilm_model()
    model.train()
    anchors, positives = minilm_batch(model, 16), minilm_batch(model, 16)
    target = torch.arange(16)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)

    def step():
        opt.zero_grad(set_to_none=True)
        a = model(dict(anchors))["sentence_embedding"]
        p = model(dict(positives))["sentence_embedding"]
        loss = F.cross_entropy(a @ p.t() * 20, target)
        loss.backward()
        opt.step()
        loss.item()
    return step


fn = {"gpt": gpt_step, "minilm": minilm_inference, "minilm_ft": minilm_finetune}[name]()
for _ in range(2):
    fn()
wall, cpu = [], []
for _ in range(repeats):
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    wall.append((time.perf_counter() - t0) * 1000)
    cpu.append((time.process_time() - c0) * 1000)


def median(t):
    t = sorted(t)
    mid = len(t) // 2
    return t[mid] if len(t) % 2 else (t[mid - 1] + t[mid]) / 2


print(name, "%.3f %.3f %.3f" % (median(wall), min(wall), median(cpu)))
