"""Schedule spaces: generated template-free from the static analysis and a target's capabilities,
or declared by a hand-written template; explore/ searches either the same way."""

from .config import Config
from .generate import generate
from .space import Space, SpaceError
from .template import TemplateError, get_template, list_templates, register_template, template_space

__all__ = ["Config", "Space", "SpaceError", "TemplateError", "generate", "get_template", "list_templates",
           "register_template", "template_space"]
