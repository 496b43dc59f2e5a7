/* Reverse-mode automatic differentiation (PyTorch's autograd).
 *
 * The tape is built during forward: when grad mode is on and a floating input
 * of an op requires grad, the op attaches a node to its result (the result's
 * grad_fn). A node keeps edges to the nodes of its inputs (or to the leaf
 * tensors whose .grad it accumulates into) and the tensors its backward needs,
 * each with its storage version at save time: an in-place write to a saved
 * tensor makes backward fail with a message naming both ops.
 *
 * Nodes are refcounted: a tensor holds its grad_fn, a node holds the nodes of
 * its inputs. Dropping the last tensor of a graph frees the graph; backward
 * frees the saved tensors unless retain_graph is set. In no_grad mode nothing
 * is recorded and nothing is saved.
 *
 * Only first derivatives are supported (no create_graph): backward formulas
 * run with grad mode off. */
#ifndef LT_AUTOGRAD_H
#define LT_AUTOGRAD_H

#include "lt/api.h"

#include <stdbool.h>

#include "lt/tensor.h"

/* ---- grad mode (per thread; on by default) ---- */
LT_API bool lt_is_grad_enabled(void);
/* Sets grad mode; returns the previous value, so that a scope is
 *   bool prev = lt_set_grad_enabled(false); ...; lt_set_grad_enabled(prev); */
LT_API bool lt_set_grad_enabled(bool enabled);

/* ---- tensors ---- */
/* Marks a leaf as requiring grad (or not). Only floating dtypes can require
 * grad; a non-leaf can be set to true (a no-op) but not to false. */
LT_API lt_status lt_requires_grad_(lt_tensor *t, bool requires_grad);
/* A leaf has no grad_fn: created by the user, or computed without grad. */
LT_API bool lt_is_leaf(const lt_tensor *t);
/* "MulBackward", ... ; NULL for a leaf. */
LT_API const char *lt_grad_fn_name(const lt_tensor *t);

/* ---- backward ----
 * Computes the gradient of root with respect to every leaf of its graph that
 * requires grad and adds it to the leaf's .grad (created on first use with
 * the storage category "gradient"). grad is d(something)/d(root), of root's
 * shape; NULL means 1 and needs a one-element root. Gradients of non-leaf
 * tensors are not kept. Without retain_graph the saved tensors are freed, and
 * a second backward through the same nodes is an error. */
LT_API lt_status lt_backward(lt_tensor *root, const lt_tensor *grad, bool retain_graph);

/* ---- custom functions (lt.autograd.Function) ----
 * The caller runs the forward itself (with grad mode off) and then ties the
 * outputs to the inputs with one node. At backward the node calls fn with the
 * gradient of every output (zeros for an output that received none) and fn
 * fills grad_inputs[i] with a new reference to the gradient of input i (of
 * input i's shape, or broadcastable to it) or leaves it NULL. fn must return
 * a status, never jump out (a Lua binding calls Lua through lua_pcall). It
 * runs with grad mode off.
 *
 * ud belongs to the node: free_ud(ud) runs when the node's saved state is
 * released (after a backward without retain_graph, or when the graph is
 * freed), or at once when nothing is recorded (no input requires grad, or
 * grad mode is off). ud must not hold references to the outputs (that would
 * be a cycle that keeps the graph alive). Outputs of a floating dtype are
 * marked as requiring grad; an output may not be one of the inputs. */
/* ---- saved tensors ----
 * A tensor kept for backward is held by an alias (same storage, no autograd
 * metadata) made here; while any such alias is alive, in any graph, the
 * storage counts as "activation" in the memory statistics (unless it has a
 * category of its own: a parameter stays a parameter). When the last one is
 * released the storage counts as "other" again. */
LT_API lt_status lt_autograd_save(const lt_tensor *t, lt_tensor **alias);
/* Releases an alias from lt_autograd_save (NULL allowed); returns the bytes
 * given back to the allocator. */
LT_API size_t lt_autograd_release_saved(lt_tensor *alias);

typedef lt_status (*lt_custom_backward_fn)(void *ud, lt_tensor *const *grad_outputs, int nout,
                                           lt_tensor **grad_inputs, int nin);
LT_API lt_status lt_autograd_custom(lt_tensor **outputs, int nout, lt_tensor *const *inputs, int nin,
                             const char *name, lt_custom_backward_fn fn, void *ud,
                             void (*free_ud)(void *));

/* ---- hooks after a leaf's gradient is accumulated ----
 * PyTorch's register_post_accumulate_grad_hook: fn(ud, leaf) runs once per
 * backward for each leaf t that received a gradient in it, after the last
 * contribution of that backward was added into t->grad (data-parallel
 * training starts a bucket's reduction there). A status other than LT_OK
 * stops the backward with that error; the graph is left as any failed
 * backward leaves it. fn must not jump out (a Lua binding calls Lua through
 * lua_pcall). free_ud(ud), if given, runs when the hook is removed or t is
 * freed. *id receives a number that names the hook for removal. */
typedef lt_status (*lt_grad_hook_fn)(void *ud, lt_tensor *leaf);
LT_API lt_status lt_autograd_add_post_accumulate_hook(lt_tensor *t, lt_grad_hook_fn fn, void *ud,
                                                      void (*free_ud)(void *), uint64_t *id);
/* Removes hook id of t (also from inside a hook); false when t has none of
 * that id (already removed). */
LT_API bool lt_autograd_remove_post_accumulate_hook(lt_tensor *t, uint64_t id);
/* Moves from's hooks to to (after to's own), as t.data = src keeps t's hooks
 * in PyTorch: the binding that swaps a handle's tensor calls it. */
LT_API lt_status lt_autograd_move_hooks(lt_tensor *from, lt_tensor *to);

/* reached[i] = whether backward from roots would give leaves[i] a gradient
 * (some node of the roots' graph accumulates into it, or it is a root). */
LT_API lt_status lt_autograd_reaches(lt_tensor *const *roots, int nroots, lt_tensor *const *leaves,
                                     int nleaves, bool *reached);

/* While an estimate runs (lt.memory.estimate): called before any change of
 * t->grad (the slot itself, not its values), so that lt_grad_journal_restore
 * can put the gradient back at the estimate's end. Does nothing otherwise. */
LT_API lt_status lt_grad_journal_note(lt_tensor *t);
LT_API void lt_grad_journal_restore(void);

#endif
