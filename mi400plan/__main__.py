from mi400plan.cli import console

console()
