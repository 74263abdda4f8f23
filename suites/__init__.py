"""What to measure: the model registry, the built-in suites, and loading users' suites.

Public API for users' own suites::

    from compilewatch.suites import model

    @model("tiny_mlp")
    def tiny_mlp():
        return torch.nn.Sequential(...), (torch.randn(8, 64),)
"""

from compilewatch.suites.registry import BuildContext, ModelSpec, model

__all__ = ["BuildContext", "ModelSpec", "model"]
