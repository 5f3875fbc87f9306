// make_case_inputs (reference.h): the generated inputs plus, under pass=bwd, the forward's saved results.
#include "attn_oracle/reference/reference.h"

#include "attn_oracle/reference/indexer_backward.h"

namespace ao {

Inputs make_case_inputs(const Layout& l) {
  Inputs in = make_inputs(l);
  if (l.c.op == Op::Indexer && l.c.pass == Pass::Bwd) make_indexer_backward_inputs(l, in);
  // The backward inputs that come from the exact forward are added here, per op, where its backward
  // exists (the layout stage refuses pass=bwd for an op whose backward does not).
  return in;
}

}  // namespace ao
