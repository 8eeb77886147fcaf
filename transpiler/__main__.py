from transpiler.cli import main

main()
