from mi400plan.cli import main

main()
