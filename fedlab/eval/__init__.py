"""Evaluation: multiple-choice log-likelihood accuracy, Rouge-L and exact match."""
from fedlab.eval.generation import generation_scores, rouge_l_and_em
from fedlab.eval.multiple_choice import choice_loglikelihoods, mc_accuracy

__all__ = ["choice_loglikelihoods", "mc_accuracy", "generation_scores", "rouge_l_and_em"]
