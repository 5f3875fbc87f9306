#!/usr/bin/env python3
"""What of the cuDNN frontend's Python SDPA serves on this GPU (scripts/device/real-kernels-campaign.sh step
fes-probe): versions, whether FROST engines are on offer (cudnn/engines/manifest.py: the sdpa fwd / bwd
families' offered ids, CUDNN_FRONTEND_ENABLE_FROST_ENGINES for the opt-in slots), and each direct wrapper
on one small dense call (and THD for sdpa_fwd_wrapper_sm80): ran or declined with its own message, and
when it ran the max |error| against torch's fp32 SDPA (a smoke check; the oracle judges the table).

  cudnn-fe-sdpa-probe.py [NAME_PART...]   (AO_SITE_DIR: the unpacked wheels; NAME_PART: only the probes whose
                                           name contains one, e.g. sdpa_bwd)
"""
import os
import site
import sys
import time
import traceback

d = os.environ.get("AO_SITE_DIR")
if d:
    sys.path.insert(0, d)
    site.addsitedir(d)
import torch  # noqa: E402

ONLY = sys.argv[1:]  # probe names containing one of these (all when none given)


def say(*a):
    print(*a, flush=True)


def first_line(e):
    m = str(e).strip().splitlines()
    return f"{type(e).__name__}: {m[0] if m else ''}"[:600]


def ref(q, k, v, causal, bottom_right=False):
    """(B, H, S, D) fp32 reference with top-left or bottom-right causal; returns O, natural LSE (B, H, S)."""
    q, k, v = q.float(), k.float(), v.float()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        sq, sk = s.shape[-2], s.shape[-1]
        i = torch.arange(sq, device=s.device)[:, None] + ((sk - sq) if bottom_right else 0)
        s = s.masked_fill(torch.arange(sk, device=s.device)[None, :] > i, float("-inf"))
    lse = torch.logsumexp(s, -1)
    return torch.softmax(s, -1) @ v, lse


def probe(name, fn):
    if ONLY and not any(o in name for o in ONLY):
        return
    t0 = time.perf_counter()
    try:
        res = fn()
        say(f"{name}: RAN in {time.perf_counter() - t0:.1f}s: {res}")
    except Exception as e:  # noqa: BLE001 - recorded: what the frontend says is the finding
        say(f"{name}: DECLINED/FAILED in {time.perf_counter() - t0:.1f}s: {first_line(e)}")
        tb = traceback.format_exc().strip().splitlines()
        say("   at: " + " | ".join(x.strip() for x in tb[-4:-1])[:600])


def main():
    import cudnn
    import cutlass
    from cudnn.engines import manifest
    say(f"cudnn frontend: {cudnn.__version__} | cuDNN backend: {cudnn.backend_version()}")
    say(f"cutlass DSL: {getattr(cutlass, '__version__', '?')}")
    say(f"torch: {torch.__version__} cuda {torch.version.cuda} | device {torch.cuda.get_device_name()} "
        f"sm {torch.cuda.get_device_capability()}")
    say(f"CUDNN_FRONTEND_ENABLE_FROST_ENGINES={os.environ.get('CUDNN_FRONTEND_ENABLE_FROST_ENGINES', '(unset)')} "
        f"-> opt-in engines offered: {manifest.opt_in_engines_enabled()}")
    for fam in manifest.MANIFEST:
        if fam.name in ("frost_sdpa_fwd", "frost_sdpa_bwd"):
            say(f"{fam.name}: offered {fam.offered_ids()}; opt-in slots "
                f"{sorted(n for n, s in fam.slots.items() if s.opt_in)}")
    from cudnn.sdpa import fwd
    dev = torch.device("cuda")
    torch.manual_seed(0)

    def bhsd(b, h, s, dd, dtype=torch.bfloat16):
        return torch.randn(b, s, h, dd, device=dev, dtype=dtype).transpose(1, 2)

    def check(o, lse, q, k, v, causal, bottom_right=False):
        ro, rl = ref(q, k, v, causal, bottom_right)
        msg = f"o {tuple(o.shape)} max|err| {float((o.float() - ro).abs().max()):.3g}"
        if lse is not None:
            lt = lse.float()
            if lt.shape == rl.shape:
                msg += f", lse {tuple(lse.shape)} max|err| natural {float((lt - rl).abs().max()):.3g}" \
                       f" log2 {float((lt - rl * 1.4426950408889634).abs().max()):.3g}"
            else:
                msg += f", lse shape {tuple(lse.shape)}"
        return msg

    for dd in (512, 128):
        def sm90(dd=dd):
            q, k, v = bhsd(2, 4, 64, dd), bhsd(2, 4, 64, dd), bhsd(2, 4, 64, dd)
            r = fwd.sdpa_fwd_wrapper_dsl_sm90(q, k, v, is_causal=True, scale_softmax=dd ** -0.5)
            torch.cuda.synchronize()
            return check(r["o_tensor"], r["lse_tensor"], q, k, v, True)
        probe(f"sdpa_fwd_wrapper_dsl_sm90 dense d={dd}", sm90)

        def sm90_lens(dd=dd):
            q, k, v = bhsd(2, 4, 64, dd), bhsd(2, 4, 64, dd), bhsd(2, 4, 64, dd)
            lens = torch.tensor([64, 64], dtype=torch.int32, device=dev)
            r = fwd.sdpa_fwd_wrapper_dsl_sm90(q, k, v, is_causal=True, scale_softmax=dd ** -0.5, seq_q_lens=lens,
                                              seq_kv_lens=lens)
            torch.cuda.synchronize()
            return check(r["o_tensor"], r["lse_tensor"], q, k, v, True)
        probe(f"sdpa_fwd_wrapper_dsl_sm90 dense+seq_lens d={dd}", sm90_lens)

    def sm80_dense():
        q, k, v = bhsd(2, 4, 64, 128), bhsd(2, 4, 64, 128), bhsd(2, 4, 64, 128)
        r = fwd.sdpa_fwd_wrapper_sm80(q, k, v, is_causal=True, scale_softmax=128 ** -0.5)
        torch.cuda.synchronize()
        return check(r["o_tensor"], r["lse_tensor"], q, k, v, True)
    probe("sdpa_fwd_wrapper_sm80 dense d=128", sm80_dense)

    def sm80_thd():
        q = torch.randn(1, 96, 4, 128, device=dev, dtype=torch.bfloat16)
        k = torch.randn(1, 96, 4, 128, device=dev, dtype=torch.bfloat16)
        v = torch.randn(1, 96, 4, 128, device=dev, dtype=torch.bfloat16)
        cu = torch.tensor([0, 64, 96], dtype=torch.int32, device=dev)
        r = fwd.sdpa_fwd_wrapper_sm80(q, k, v, is_causal=True, scale_softmax=128 ** -0.5, cum_seqlen_q_tensor=cu,
                                      cum_seqlen_k_tensor=cu, max_s_q=64)
        torch.cuda.synchronize()
        o = r["o_tensor"]
        ro, _ = ref(q[:, :64].transpose(1, 2), k[:, :64].transpose(1, 2), v[:, :64].transpose(1, 2), True)
        return f"o {tuple(o.shape)} lse {tuple(r['lse_tensor'].shape)}; seq 0 max|err| " \
               f"{float((o.reshape(96, 4, 128)[:64].float() - ro[0].transpose(0, 1)).abs().max()):.3g}"
    probe("sdpa_fwd_wrapper_sm80 THD d=128", sm80_thd)

    # The backward's inputs come from the fp32 reference (O, natural LSE), not from the SM80 forward wrapper,
    # which declines on SM90 before the backward would be reached. The LSE is tried in the shapes the
    # wrapper's forward twin returns ((B, H, S) and (B, H, S, 1)) and both log bases; each try's outcome is kept.
    def bwd_sm80(d=128, causal=True):
        from cudnn.sdpa import bwd
        q, k, v = (bhsd(1, 4, 64, d).requires_grad_(True) for _ in range(3))
        o, lse = ref(q, k, v, causal)
        do = torch.randn_like(o)
        o.backward(do)
        ob, dob = (x.detach().to(torch.bfloat16).transpose(1, 2).contiguous().transpose(1, 2) for x in (o, do))
        tries = []
        for shape in ("bhs", "bhs1"):
            for base, l in (("natural", lse.detach()), ("log2", lse.detach() * 1.4426950408889634)):
                l = (l if shape == "bhs" else l[..., None]).float().contiguous()
                try:
                    r = bwd.sdpa_bwd_wrapper_sm80(q.detach(), k.detach(), v.detach(), ob, dob, l, is_causal=causal,
                                                  scale_softmax=d ** -0.5)
                    torch.cuda.synchronize()
                    errs = ", ".join(f"{n} max|err| {float((r[n + '_tensor'].float() - g.grad).abs().max()):.3g} "
                                     f"(|ref| max {float(g.grad.abs().max()):.3g})" for n, g in (("dq", q), ("dk", k), ("dv", v)))
                    tries.append(f"lse {shape} {base}: RAN: {errs}")
                except Exception as e:  # noqa: BLE001 - what it says is the finding
                    tries.append(f"lse {shape} {base}: {first_line(e)}")
                    if "requires SM80" in str(e):
                        raise  # the architecture decline: the same for every LSE form
        ran = [t for t in tries if ": RAN: " in t]
        if not ran:
            raise RuntimeError("every LSE form failed: " + " || ".join(tries))
        return " || ".join(tries)
    probe("sdpa_bwd_wrapper_sm80 dense d=128 (fp32-reference forward)", bwd_sm80)


if __name__ == "__main__":
    main()
