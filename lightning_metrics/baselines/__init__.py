"""The baselines: BLEU and chrF (sacrebleu) and ROUGE (rouge-score) in :mod:`.lexical`, BERTScore
in :mod:`.bertscore`, each computed by name through :mod:`.scores`; :mod:`.signals` records them
as training targets or as a hybrid model's inputs."""
