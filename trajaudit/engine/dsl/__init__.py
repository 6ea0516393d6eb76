"""The rule language: ``rules.lark`` → AST (``ast``) → closures (``compiler``) over runtime views
(``runtime``), with builtins, message templates and the ``regex/`` safety and prefilter analyses.
Rule text is parsed and compiled to Python closures; nothing is ever eval'd. See docs/rules.md."""

from trajaudit.engine.dsl.compiler import ExprCompiler
from trajaudit.engine.dsl.parser import Where, parse_expression
from trajaudit.engine.dsl.runtime import Env, EvalError
from trajaudit.engine.dsl.template import compile_template

__all__ = ["Env", "EvalError", "ExprCompiler", "Where", "compile_template", "parse_expression"]
