"""CRD and the SCNS students: CRD's memory-bank objective with the negatives drawn by a sampler.

Per step (anchor i = batch.indices, y its label), with M_S / M_T the student / teacher memory banks:
    negatives n = sampler.sample(i, y, K, batch.generator)            [B, K]; uniform other-class (CRD),
                                                                      SCNS-class or SCNS-instance
    student anchor v_S(i) scores against M_T[i, n], teacher anchor v_T(i) against M_S[i, n]
    objective: CRD's NCE (crd, crd_kd: uniform noise P_n = 1/N, as its sampler) or InfoNCE (SCNS default:
      the SCNS samplers are not uniform and never draw the anchor, so NCE's noise model does not hold)
    Latent Mixup (docs/papers/scns.md §c.4; SCNS §1: mixing positive and negative representations "to produce
      harder pseudo negative sample representations ... and a distance is minimized between both mixed
      representations"), lambda ~ U(0, lm_lam_max) shared by both sides, first M = lm_num_mixed negatives:
      both (default): the pseudo-negatives of `extra` and the distance term of `distance`, one lambda for both
      distance (variant): + lm_weight * mean ||n(lambda v_S + (1 - lambda) M_S[n_m]) - n(lambda v_T + (1 - lambda) M_T[n_m])||^2
                          (the anchors' current embeddings as the positives, so the term has a gradient)
      extra (variant):    M_T~ = n(lambda M_T[i] + (1 - lambda) M_T[n_m]) join the student anchor's negatives,
                          M_S~ likewise the teacher anchor's (K + M negatives)
    then the banks move (CRDLoss semantics).
SCNS-instance draws its K negatives from a pool of k images: K is capped at k (without replacement under
uniform weighting: each pool image once), since more draws would only repeat the pool (K = 16,384 from 10
images is ~1,638 copies of each, a constant log-multiplicity offset, not more negatives).
Every draw comes from batch.generator, the epoch's generator after augmentation: a resumed epoch
redraws the same negatives and lambdas. The SCNS class-similarity matrix / instance pools and their
sha256 are written into the run folder (scns_negatives.pt, scns_negatives.json).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import torch

from semcl.data.semantics.negatives import ClassConditionedNegatives, InstanceConditionedNegatives, UniformNegatives
from semcl.errors import ConfigError
from semcl.files import write_atomic, write_text_atomic
from semcl.losses.distill import CRDLoss, infonce_loss, nce_loss, normalised
from semcl.losses.latent_mixup import (
    latent_mixup_negatives,
    lm_distance_loss,
    mix_with_positive,
    sample_mixup_lambda,
)
from semcl.methods.base import Batch, TrainContext
from semcl.methods.distill.core import Distill


def contrast_scores(crd: CRDLoss, v_s: torch.Tensor, v_t: torch.Tensor, index: torch.Tensor, negatives: torch.Tensor,
                    mixed: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """CRD's two-sided objective on given embeddings; `mixed` = (teacher-side, student-side) [B, M, D]
    extra negatives. Fixes Z on the first call and updates the banks (as CRDLoss.forward)."""
    idx = torch.cat([index.view(-1, 1), negatives], dim=1)
    m_t = crd.memory.memory_t[idx].detach()
    m_s = crd.memory.memory_s[idx].detach()
    if mixed is not None:
        m_t, m_s = torch.cat([m_t, mixed[0].to(m_t.dtype)], 1), torch.cat([m_s, mixed[1].to(m_s.dtype)], 1)
    logit_s = torch.einsum("bkd,bd->bk", m_t, v_s) / crd.T
    logit_t = torch.einsum("bkd,bd->bk", m_s, v_t) / crd.T
    if crd.objective == "infonce":
        loss = infonce_loss(logit_s) + infonce_loss(logit_t)
    else:
        exp_s, exp_t = logit_s.exp(), logit_t.exp()
        n = crd.memory.n_data
        loss = nce_loss(normalised(exp_s, crd.z_s, n), n) + nce_loss(normalised(exp_t, crd.z_t, n), n)
    crd.memory.update_(v_s, v_t, index)
    return loss


@dataclass
class ContrastBatch(Batch):
    """A step's batch with its contrast negatives drawn on the host (CRD.prepare): [B, K] training-set indices."""

    negatives: torch.Tensor | None = None

class CRD(Distill):
    """CRD (and CRD+KD: alpha 1): uniform other-class negatives; `sampler` is replaced by SCNS."""

    teacher_feats = (-1,)

    def build(self, s_shapes, t_shapes):
        m = self.cfg.method
        if self.n_data < 2:
            raise ValueError(f"method {m.name!r}: the training-set size is unknown (DataInfo.class_counts)")
        self.crd = CRDLoss(s_shapes[-1][1], t_shapes[-1][1], self.n_data, m.feat_dim, m.nce_t, m.nce_momentum,
                           m.objective)
        self.sampler = None

    def set_up(self, ctx: TrainContext) -> None:
        labels = ctx.train_set.labels.cpu()
        if labels.numel() != self.n_data:
            raise ValueError(f"training set has {labels.numel()} images, the memory banks {self.n_data}")
        self.train_labels = labels
        self.sampler = self.make_sampler(ctx)

    def make_sampler(self, ctx: TrainContext):
        return UniformNegatives(self.train_labels, self.info.num_classes)

    def num_negatives(self) -> int:
        """K drawn per anchor (method.nce_k; SCNS-instance caps it at its pool)."""
        return self.cfg.method.nce_k

    def prepare(self, batch: Batch) -> ContrastBatch:
        """The step's [B, K] negatives by training-set index, drawn from batch.generator where the step's loss
        reads them (the label values steer the sampler: host work)."""
        m = self.cfg.method
        negatives = None
        if batch.epoch >= self.init_epochs and m.beta:  # the steps whose loss calls distill_loss
            idx = batch.indices.cpu()
            negatives = self.sampler.sample(idx, self.train_labels[idx], self.num_negatives(), batch.generator)
        return ContrastBatch(**{f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)},
                             negatives=negatives)

    def distill_loss(self, feats_s, feats_t, batch):
        m = self.cfg.method
        dev = feats_s[-1].device
        index, neg = batch.indices.to(dev), batch.negatives.to(dev)
        v_s, v_t = self.crd.embed_s(feats_s[-1]), self.crd.embed_t(feats_t[-1])
        if not getattr(m, "latent_mixup", False):
            return contrast_scores(self.crd, v_s, v_t, index, neg)
        n_mix = m.lm_num_mixed or neg.shape[1]
        mem_t, mem_s = self.crd.memory.memory_t, self.crd.memory.memory_s
        if m.lm_mode == "extra":
            t_mix, s_mix, _ = latent_mixup_negatives(mem_t[index], mem_t[neg], mem_s[index], mem_s[neg], n_mix,
                                                     batch.generator, m.lm_lam_max)
            return contrast_scores(self.crd, v_s, v_t, index, neg, (t_mix.detach(), s_mix.detach()))
        lam = sample_mixup_lambda((neg.shape[0], n_mix), batch.generator, m.lm_lam_max)
        s_neg, t_neg = mem_s[neg[:, :n_mix]].detach(), mem_t[neg[:, :n_mix]].detach()
        # the distance: each side's current embedding mixed with its negatives, so the term has a gradient
        distance = lm_distance_loss(mix_with_positive(v_s, s_neg, lam), mix_with_positive(v_t, t_neg, lam))
        mixed = None
        if m.lm_mode == "both":  # the same lambda mixes each side's bank positive into pseudo-negatives
            mixed = (mix_with_positive(mem_t[index], t_neg, lam).detach(),
                     mix_with_positive(mem_s[index], s_neg, lam).detach())
        # distill_loss is scaled by beta in the total: lm_weight is the distance term's weight on the total
        return contrast_scores(self.crd, v_s, v_t, index, neg, mixed) + distance * (m.lm_weight / m.beta)

    def write_negatives(self, ctx: TrainContext, tensors: dict[str, torch.Tensor], fingerprint: str) -> None:
        """The sampler's defining tensors and their sha256 in the run folder."""
        if ctx.run_dir is None:
            return
        ctx.run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(ctx.run_dir / "scns_negatives.pt", lambda f: torch.save(tensors, f))
        m = self.cfg.method
        write_text_atomic(ctx.run_dir / "scns_negatives.json", json.dumps(
            {"method": m.name, "sha256": fingerprint, "k": m.k, "weighting": m.weighting,
             "objective": m.objective, "nce_k": m.nce_k, "negatives_per_anchor": self.num_negatives()}, indent=1))


class SCNSClass(CRD):
    """SCNS-class: a negative class drawn from p(c'|y) over the top-k word-similar classes, then an image."""

    def make_sampler(self, ctx: TrainContext):
        from semcl.data.semantics.word_vectors import class_word_vectors, content_sha256, cosine_similarity_matrix

        m = self.cfg.method
        names = self.info.class_names
        if not names:
            raise ValueError(f"{self.cfg.data.name}: SCNS-class needs class names (DataInfo.class_names is empty)")
        if m.vectors_path is not None:  # the pin that puts the file's content into the run id
            got = content_sha256(m.vectors_path)
            if got != m.vectors_sha256:
                raise ConfigError(f"{m.vectors_path}: content sha256 {got}, but 'method.vectors_sha256' pins "
                                  f"{m.vectors_sha256}")
        vectors = class_word_vectors(list(names), m.vectors, m.vectors_path)
        sim = cosine_similarity_matrix(vectors.vectors)
        sampler = ClassConditionedNegatives(self.train_labels, sim, m.k, m.weighting, m.softmax_t)
        self.write_negatives(ctx, {"similarity": sim, "probs": sampler.probs}, sampler.fingerprint())
        return sampler


class SCNSInstance(CRD):
    """SCNS-instance: each image's top-k most similar other-class images under the teacher's penultimate
    features of the un-augmented training set (one pass before training)."""

    def needs_teacher_pass(self) -> bool:
        return True

    def num_negatives(self) -> int:
        return min(self.cfg.method.nce_k, self.cfg.method.k)  # the pool: more draws only repeat it

    def make_sampler(self, ctx: TrainContext):
        m = self.cfg.method
        sampler = InstanceConditionedNegatives.from_features(self.cache["feat-1"], self.train_labels, m.k, m.weighting)
        tensors = {"pools": sampler.pools, **({"weights": sampler.weights} if sampler.weights is not None else {})}
        self.write_negatives(ctx, tensors, sampler.fingerprint())
        return sampler
