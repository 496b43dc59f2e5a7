/* The free blocks of a pool as a treap ordered by (stream, size, address), as
 * PyTorch's BlockComparator: best fit is the first node of the request's
 * stream not smaller than the request, found in O(log n) expected steps, with
 * ties going to the lowest address.
 * Priorities are a hash of the block's address, so the shape of the tree (and
 * every allocation decision) is deterministic. */
#include "alloc/alloc_internal.h"

static bool key_less(const lt_block *a, const lt_block *b) {
  const lt_stream_id sa = lt_block_stream_of(a), sb = lt_block_stream_of(b);
  if (sa != sb) return sa < sb;
  if (a->size != b->size) return a->size < b->size;
  return (uintptr_t)a->ptr < (uintptr_t)b->ptr;
}

static uint32_t address_priority(const void *ptr) {
  uint64_t x = (uint64_t)(uintptr_t)ptr; /* splitmix64's finaliser */
  x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
  x ^= x >> 31;
  return (uint32_t)(x >> 32);
}

/* Splits t into the nodes ordered before key (into *l) and after it (*r). */
static void split(lt_block *t, const lt_block *key, lt_block **l, lt_block **r) {
  while (t) {
    if (key_less(t, key)) {
      *l = t;
      l = &t->right;
      t = t->right;
    } else {
      *r = t;
      r = &t->left;
      t = t->left;
    }
  }
  *l = NULL;
  *r = NULL;
}

/* Joins two treaps whose keys are all ordered l before r. */
static lt_block *join(lt_block *l, lt_block *r) {
  lt_block *root = NULL, **link = &root;
  while (l && r) {
    if (l->priority > r->priority) {
      *link = l;
      link = &l->right;
      l = l->right;
    } else {
      *link = r;
      link = &r->left;
      r = r->left;
    }
  }
  *link = l ? l : r;
  return root;
}

void lt_block_tree_insert(lt_block_tree *tree, lt_block *block) {
  block->priority = address_priority(block->ptr);
  lt_block **link = &tree->root;
  while (*link && (*link)->priority >= block->priority)
    link = key_less(block, *link) ? &(*link)->left : &(*link)->right;
  split(*link, block, &block->left, &block->right);
  *link = block;
}

void lt_block_tree_remove(lt_block_tree *tree, lt_block *block) {
  lt_block **link = &tree->root;
  while (*link != block) link = key_less(block, *link) ? &(*link)->left : &(*link)->right;
  *link = join(block->left, block->right);
  block->left = block->right = NULL;
}

lt_block *lt_block_tree_best_fit(const lt_block_tree *tree, lt_stream_id stream, size_t size) {
  lt_block *best = NULL;
  /* The first node not before (stream, size); it fits only if it is of stream. */
  for (lt_block *t = tree->root; t;) {
    const lt_stream_id st = lt_block_stream_of(t);
    if (st > stream || (st == stream && t->size >= size)) {
      best = t;
      t = t->left;
    } else {
      t = t->right;
    }
  }
  return best && lt_block_stream_of(best) == stream ? best : NULL;
}
