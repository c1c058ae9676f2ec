from apiserver.agent.main import main

main()
