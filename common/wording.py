"""Counted nouns in the messages the commands print: "1 epoch", "2 epochs"."""


def counted(number, noun, plural=None, spec=""):
    """`number` formatted with the format spec `spec` (e.g. "," for
    thousands), then `noun`, or its plural (default: `noun` + "s") unless
    `number` is 1."""
    return f"{number:{spec}} {noun if number == 1 else plural or noun + 's'}"
